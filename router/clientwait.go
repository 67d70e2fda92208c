package router

import (
	"context"

	"github.com/tenure-go/tenure/fleet"
	"github.com/tenure-go/tenure/ownership"
)

// Between two attempts of a call, Do waits only as long as nothing new is
// known about where the call goes. The refusal of a planned move names
// where it goes next (the hint): when that is news, the next attempt goes
// there at once. Otherwise Do waits the backoff's delay, but no longer
// than until the Client's view of the key's partition changes (a claim
// deleted or made, an owner that publishes its address): then the next
// attempt follows the change at once. Every attempt still counts against
// the backoff's MaxAttempts, and every wait ends with ctx.

// progress is what one call of Do has learnt of its partition's claims:
// the news that allows an attempt without a delay.
type progress struct {
	epoch    int64 // the highest claim epoch the call was sent to or told of
	nextUsed bool  // an attempt went at once to a hinted next owner without a claim
}

// newHint reports whether hint, from the refusal of an attempt sent along
// route, is news that the next attempt follows at once: a newer claim
// than any the call has seen, or, once per call, the next owner of a
// partition whose claim (the one route named) has ended.
func (g *progress) newHint(route fleet.Route, hint *ownership.WrongOwnerError) bool {
	g.epoch = max(g.epoch, route.Epoch)
	if hint == nil || hint.Owner == "" || hint.Addr == "" || hint.Partition != route.Partition {
		return false
	}
	switch {
	case hint.Epoch > g.epoch:
		g.epoch = hint.Epoch
		return true
	case hint.Epoch == 0 && !g.nextUsed && hint.Owner != route.Owner:
		g.nextUsed = true
		return true
	}
	return false
}

// wait waits before retry number retry of a call for key's partition,
// whose last attempt went along tried (the zero Route with its Partition
// if no node could be named) while changed was the Client's view change
// channel: the backoff's delay, cut short when the view's route of the
// partition differs from tried. It returns ctx's error if ctx ends first.
func (c *Client) wait(ctx context.Context, retry int, tried fleet.Route, changed <-chan struct{}) error {
	if c.moved(tried) {
		return nil
	}
	timer := c.cfg.Clock.NewTimer(c.cfg.Backoff.Next(retry))
	defer timer.Stop()
	for {
		select {
		case <-changed:
			changed = c.Changed()
			if c.moved(tried) {
				return nil
			}
		case <-timer.Chan():
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// moved reports whether the Client's view of tried's partition names
// another node, address or claim than tried.
func (c *Client) moved(tried fleet.Route) bool {
	r := c.obs.Route(tried.Partition)
	return r.Addr != "" && (r.Owner != tried.Owner || r.Addr != tried.Addr || r.Epoch != tried.Epoch)
}
