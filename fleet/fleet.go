package fleet

import (
	"context"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ring"
)

// Route says where the work for one partition goes, as a Node
// (ownership.Node.Lookup) or an Observer currently sees it: the partition,
// its Owner with the owner's Addr, the Epoch and Since of the owner's
// claim, whether the answering node serves it (Local), and the
// RingVersion it was computed from. Nodes and Observers compute it from
// the fleet by one rule (see Observer.Route); it is the one owner hint of
// the library.
type Route = fleetview.Route

// Member is a node registered in the fleet, as published in its member
// key: its ID, its advertised address Addr (possibly empty) and its
// metadata Meta (possibly nil).
type Member = fleetview.Member

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
	return fleetview.ReadSpec(ctx, kv, keys.ForPrefix(prefix))
}

// DefaultPrefix returns the key prefix of cluster when no Prefix is
// configured: "/tenure/<cluster>/".
func DefaultPrefix(cluster string) string { return keys.DefaultPrefix(cluster) }
