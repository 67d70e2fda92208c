// Package follow holds the rules by which tenure's clients (router.Client
// over HTTP, grpcroute's interceptors and balancer over gRPC) follow a
// partition's owner between the attempts of one call: where the next
// attempt goes (Choose), when it goes at once (Progress), how long it
// waits otherwise (Wait), and how long one attempt may go unanswered
// before it is cut off and sent again (Bound, bound.go).
//
// A refused attempt's refusal names where its call goes next, the hint: a
// newer claim of the partition, or, while nobody holds one, the ring's
// next owner. The client's view of the fleet (a fleet.Observer) says the
// same a watch hop later. Hints only ever steer attempts: admission stays
// with the node, which serves only what it owns.
package follow

import (
	"context"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/tenure-go/tenure/ownership/fleet"
)

// Choose returns where the next attempt for a partition goes: view, the
// client's route of it, unless hint (a refusal's, of the same partition
// and with an address other than refused, the address whose attempt
// failed last) names a newer claim than view, or view has no address or
// names refused. A zero hint is none.
func Choose(view, hint fleet.Route, refused string) fleet.Route {
	if hint.Owner == "" || hint.Addr == "" || hint.Partition != view.Partition || hint.Addr == refused {
		return view
	}
	if hint.Epoch > view.Epoch || view.Addr == "" || view.Addr == refused {
		return hint
	}
	return view
}

// Progress is what one call has learnt of its partition's claims: the
// news that allows its next attempt without a delay. Its zero value is a
// call that has learnt nothing.
type Progress struct {
	epoch    int64 // the highest claim epoch the call was sent to or told of
	nextUsed bool  // an attempt went at once to a hinted next owner without a claim
}

// News reports whether hint, from the refusal of an attempt sent along
// tried, is news that the next attempt follows at once: a newer claim
// than any the call has seen, or, once per call, the next owner of a
// partition whose claim (the one tried named) has ended. A zero hint is
// none. Hints that repeat, go back in epochs or name another partition are
// no news, so that refusals pointing at each other cannot make a call
// spin.
func (g *Progress) News(tried, hint fleet.Route) bool {
	g.epoch = max(g.epoch, tried.Epoch)
	if hint.Owner == "" || hint.Addr == "" || hint.Partition != tried.Partition {
		return false
	}
	switch {
	case hint.Epoch > g.epoch:
		g.epoch = hint.Epoch
		return true
	case hint.Epoch == 0 && !g.nextUsed && hint.Owner != tried.Owner:
		g.nextUsed = true
		return true
	}
	return false
}

// View is a client's view of the fleet: a *fleet.Observer.
type View interface {
	// LookupPartition returns the route of partition p.
	LookupPartition(p int) fleet.Route
	// Changed returns a channel closed at the view's next change.
	Changed() <-chan struct{}
}

// moved reports whether v's route of tried's partition names another node,
// address or claim than tried, and has an address to go to.
func moved(v View, tried fleet.Route) bool {
	r := v.LookupPartition(tried.Partition)
	return r.Addr != "" && (r.Owner != tried.Owner || r.Addr != tried.Addr || r.Epoch != tried.Epoch)
}

// Wait waits delay on c before the next attempt of a call whose last one
// went along tried, cut short as soon as v's route of the partition moves
// away from tried (moved): the next attempt then follows the change at
// once, whether it came before the wait or during it. It returns ctx's
// error if ctx ends first.
func Wait(ctx context.Context, c clockwork.Clock, delay time.Duration, v View, tried fleet.Route) error {
	changed := v.Changed() // before moved looks: a change after it closes changed
	if moved(v, tried) {
		return nil
	}
	timer := c.NewTimer(delay)
	defer timer.Stop()
	for {
		select {
		case <-changed:
			changed = v.Changed()
			if moved(v, tried) {
				return nil
			}
		case <-timer.Chan():
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
