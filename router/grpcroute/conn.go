package grpcroute

import (
	"sync/atomic"

	"google.golang.org/grpc"

	"github.com/tenure-go/tenure/internal/signal"
	"github.com/tenure-go/tenure/ownership/fleet"
)

// Conn is a connection to a fleet, made by Client.NewConn: a
// *grpc.ClientConn (generated clients take it, and Close closes it) that
// also says where the calls for a key go. A Conn is safe for concurrent
// use by multiple goroutines.
type Conn struct {
	*grpc.ClientConn
	fleet *connView
}

// Lookup returns where the connection sends calls for key: the route of
// key's partition (ring.PartitionOf) as the connection's resolver sees the
// fleet, that is the holder of the partition's claim or, while nobody
// holds one, the ring's choice of the next owner. A call's attempt goes
// there unless a refusal named a newer owner. Before the connection has
// read the fleet (its first call, or Connect, starts reading it; an idle
// connection, see grpc.WithIdleTimeout, stops), Lookup returns the zero
// Route. It takes no lock and does not allocate.
func (c *Conn) Lookup(key string) fleet.Route {
	v := c.fleet.view.Load()
	if v == nil {
		return fleet.Route{}
	}
	return v.obs.Lookup(key)
}

// Changed returns a channel that is closed the next time the
// connection's view of the fleet changes, as Lookup sees it.
func (c *Conn) Changed() <-chan struct{} { return c.fleet.changes.Changed() }

// connView is what the resolver of a Conn shares with it: the view of
// the fleet, nil while the resolver has not read it, and the signal of
// its changes.
type connView struct {
	view    atomic.Pointer[view]
	changes signal.Signal
}

// set publishes v (nil: none) and signals a change.
func (cv *connView) set(v *view) {
	cv.view.Store(v)
	cv.changes.Notify()
}

// unset withdraws v unless another view replaced it, and signals a change.
func (cv *connView) unset(v *view) {
	cv.view.CompareAndSwap(v, nil)
	cv.changes.Notify()
}
