package grpcroute

import (
	"context"
	"errors"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/ownership"
)

// hold admits a call for key, waiting for a handoff as router.Router.Do
// does: while the node's answer says the partition is being released or
// acquired here, or names no owner, or names this node, it asks again at
// each routing change, up to ServerConfig.HandoffWait and while ctx lasts.
// When it does not admit the call it returns the node's last answer and the
// hint of where the call goes.
func (s *Server) hold(ctx context.Context, key string) (ownership.Held, *ownership.WrongOwnerError, error) {
	changed := s.node.Changed()
	h, err := s.node.Hold(key)
	if err == nil {
		return h, nil, nil
	}
	we, named := errors.AsType[*ownership.WrongOwnerError](err)
	if !named || !s.waitable(we) {
		return h, s.hint(key, we), err
	}
	timer := s.cfg.Clock.NewTimer(s.cfg.HandoffWait)
	defer timer.Stop()
	for {
		select {
		case <-changed:
		case <-timer.Chan():
			return ownership.Held{}, we, err
		case <-ctx.Done():
			return ownership.Held{}, we, err
		}
		changed = s.node.Changed()
		h, err = s.node.Hold(key)
		if err == nil {
			return h, nil, nil
		}
		next, named := errors.AsType[*ownership.WrongOwnerError](err)
		if named {
			we = next
		}
		if !named || !s.waitable(we) {
			return h, we, err
		}
	}
}

// hint returns we, or when the node's answer named no owner, the node's
// route of key.
func (s *Server) hint(key string, we *ownership.WrongOwnerError) *ownership.WrongOwnerError {
	if we != nil {
		return we
	}
	return &ownership.WrongOwnerError{Route: s.node.Lookup(key)}
}

// waitable reports whether the node's answer we means a handoff worth
// waiting for.
func (s *Server) waitable(we *ownership.WrongOwnerError) bool {
	return we.Releasing || we.Acquiring || we.Owner == "" || we.Owner == s.id
}

// workContext returns the context a call admitted by h runs under: ctx's
// values and deadline, h's token (fence.FromContext) and its signature,
// ending when ctx ends or when h's tenure ends, in the latter case with
// the partition context's cause (ownership.ErrMoved, ErrLost or
// ErrClosed). The returned function releases its resources.
func workContext(ctx context.Context, h ownership.Held) (context.Context, context.CancelFunc) {
	part := h.Context
	if part == nil {
		part = fence.NewContext(context.Background(), h.Token)
	}
	wctx, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(part, func() { cancel(context.Cause(part)) })
	sig, _ := fence.SignatureFromContext(part)
	return fence.NewSignedContext(wctx, h.Token, sig), func() {
		stop()
		cancel(context.Canceled)
	}
}
