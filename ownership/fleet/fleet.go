package fleet

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/ring"
)

// Route says where the work for one partition goes, as a Node
// (ownership.Node.Lookup) or an Observer currently sees it. Nodes and
// Observers compute it from the fleet by one rule (see
// Observer.LookupPartition); it
// is the one owner hint of the library.
type Route struct {
	// Partition is the key's partition.
	Partition int
	// Owner is the node that holds the partition's claim or, if nobody holds
	// one, the node the ring assigns it to, which is about to claim it.
	// Empty if unknown (no members).
	Owner string
	// Addr is Owner's advertised address, empty if unknown (Owner published
	// none, or its member key is gone while its claim stands and no member
	// key bound to the claim's lease was seen).
	Addr string
	// Epoch is the epoch of Owner's claim, 0 if the partition is unclaimed.
	Epoch int64
	// Since is when Owner created its claim, by Owner's clock (informational:
	// the epoch, not the time, orders tenures). Zero if the partition is
	// unclaimed or the claim was written by a build that did not record it.
	Since time.Time
	// Local reports that this node holds the claim and serves the
	// partition: its fencers have been advanced and no handoff has begun.
	// Hold may still refuse a Local partition if its tenure ends in between.
	// Always false in an Observer's routes.
	//
	// A Node's route names the node itself as Owner only when Local: a
	// partition it is still acquiring, is handing off, or held before its
	// session was lost is routed to its next owner on the ring if that is
	// another node, else to no owner (Owner empty, Epoch 0).
	Local bool
	// RingVersion is the Version of the ring the route was computed from.
	RingVersion uint64
}

// Member is a node registered in the fleet, as published in its member
// key.
type Member struct {
	// ID is the node ID.
	ID string
	// Addr is the node's advertised address, possibly empty.
	Addr string
	// Meta is the node's published metadata, possibly nil.
	Meta map[string]string
	// Weight is the node's published capacity weight, in [1,
	// ring.MaxWeight]: 1 if it published none or one out of range.
	Weight int
	// Prepares says that the node prepares the partitions planned moves
	// give it, and says so in its readiness keys (a warm handoff).
	Prepares bool
	// Build is the node's build (its module version, or "devel"), empty
	// if it published none; Features are the protocol features it
	// understands, none for a build that publishes none (the base
	// protocol: claims and drain marks).
	Build    string
	Features []string
}

// routeOf converts the fleet reader's route of a partition (computed by
// fleetview.State.Route, the one route rule) to a Route.
func routeOf(r fleetview.Route) Route { return Route(r) }

// FleetClient is what an Observer needs from etcd: reads and watches, no
// lease. A *clientv3.Client satisfies it.
type FleetClient interface {
	clientv3.KV
	clientv3.Watcher
}

// ReadSpec reads the spec of the fleet whose keys live under prefix (see
// DefaultPrefix). It returns an error wrapping ErrNoSpec if no node has
// created it yet, or ring.ErrInvalidSpec if it cannot be used by this
// build.
func ReadSpec(ctx context.Context, kv clientv3.KV, prefix string) (ring.Spec, error) {
	k := keys.ForPrefix(prefix).Spec()
	resp, err := kv.Get(ctx, k)
	if err != nil {
		return ring.Spec{}, fmt.Errorf("fleet: read the fleet's spec: %w", err)
	}
	if len(resp.Kvs) == 0 {
		return ring.Spec{}, fmt.Errorf("%w at %s", ErrNoSpec, k)
	}
	return fleetview.DecodeSpec(resp.Kvs[0].Value)
}

// DefaultPrefix returns the key prefix of cluster when no Prefix is
// configured: "/tenure/<cluster>/".
func DefaultPrefix(cluster string) string { return keys.DefaultPrefix(cluster) }
