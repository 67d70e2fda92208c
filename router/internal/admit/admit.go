// Package admit is the admission that router (HTTP, in process) and
// grpcroute (gRPC) share on a node: Hold holds a key's partition for work,
// waiting out a handoff, and WorkContext gives the admitted work its
// context.
package admit

import (
	"context"
	"errors"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/fleet"
)

// Node is what admission needs of a node (*ownership.Node is one).
type Node interface {
	// Lookup returns the route of key's partition; it must not block.
	Lookup(key string) fleet.Route
	// Hold admits local work for key, or says who owns it.
	Hold(key string) (ownership.Held, error)
	// Changed returns a channel closed at the next routing change.
	Changed() <-chan struct{}
}

// Wait says how Hold waits out a handoff.
type Wait struct {
	// Self is the node's ID.
	Self string
	// For bounds the wait.
	For time.Duration
	// Clock times it.
	Clock clockwork.Clock
}

// Hold admits work for key on n, waiting for a handoff: while the node's
// answer says the partition is being released or acquired here, or names
// no owner, or names this node, it asks again at each routing change, up
// to w.For and while ctx lasts. When it does not admit the work it returns
// the node's last answer (a *WaitError when ctx ended during the wait) and
// the hint of where the work goes: the node's answer, or its route of key
// when the answer named no owner.
func Hold(ctx context.Context, n Node, w Wait, key string) (ownership.Held, *ownership.WrongOwnerError, error) {
	changed := n.Changed()
	h, err := n.Hold(key)
	if err == nil {
		return h, nil, nil
	}
	we, named := errors.AsType[*ownership.WrongOwnerError](err)
	if !named || !waitable(we, w.Self) {
		if we == nil {
			we = &ownership.WrongOwnerError{Route: n.Lookup(key)}
		}
		return h, we, err
	}
	timer := w.Clock.NewTimer(w.For)
	defer timer.Stop()
	for {
		select {
		case <-changed:
		case <-timer.Chan():
			return ownership.Held{}, we, err
		case <-ctx.Done():
			return ownership.Held{}, we, &WaitError{Ctx: ctx.Err(), Last: err}
		}
		changed = n.Changed()
		h, err = n.Hold(key)
		if err == nil {
			return h, nil, nil
		}
		next, named := errors.AsType[*ownership.WrongOwnerError](err)
		if named {
			we = next
		}
		if !named || !waitable(we, w.Self) {
			return h, we, err
		}
	}
}

// waitable reports whether the node's answer we means a handoff worth
// waiting for on node self.
func waitable(we *ownership.WrongOwnerError, self string) bool {
	return we.Releasing || we.Acquiring || we.Owner == "" || we.Owner == self
}

// WaitError is Hold's error when ctx ended during a handoff wait. It wraps
// both ctx's error and the node's last answer.
type WaitError struct {
	Ctx  error
	Last error
}

func (e *WaitError) Error() string {
	return "waiting for handoff: " + e.Ctx.Error() + ": " + e.Last.Error()
}

func (e *WaitError) Unwrap() []error { return []error{e.Ctx, e.Last} }
