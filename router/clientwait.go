package router

import (
	"context"

	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/router/internal/follow"
)

// Between two attempts of a call, Do waits only as long as nothing new is
// known about where the call goes (router/internal/follow). The refusal of a
// planned move names where it goes next (the hint): when that is news, the
// next attempt goes there at once. Otherwise Do waits the backoff's delay,
// but no longer than until the Client's view of the key's partition
// changes (a claim deleted or made, an owner that publishes its address):
// then the next attempt follows the change at once. Every attempt still
// counts against the backoff's MaxAttempts, and every wait ends with ctx.

// wait waits before retry number retry of a call for key's partition,
// whose last attempt went along tried (the zero Route with its Partition
// if no node could be named): the backoff's delay, cut short when the
// view's route of the partition differs from tried. It returns ctx's error
// if ctx ends first.
func (c *Client) wait(ctx context.Context, retry int, tried fleet.Route) error {
	return follow.Wait(ctx, c.cfg.Clock, c.cfg.Backoff.policy().Next(retry), c.obs, tried)
}

// hintRoute returns the route a refusal's hint names, the zero Route for
// none.
func hintRoute(hint *ownership.WrongOwnerError) fleet.Route {
	if hint == nil {
		return fleet.Route{}
	}
	return hint.Route
}
