package fleet

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/clock"
	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/ring"
)

// FrozenObserver returns an Observer of cluster whose view is etcd's now
// and never follows it: a view lagging every later claim.
func FrozenObserver(t *testing.T, kv FleetClient, cluster string, rc ring.Config) *Observer {
	t.Helper()
	cfg := ObserverConfig{Cluster: cluster, Ring: rc, Logger: hclog.NewNullLogger()}
	r := &fleetview.Reader{KV: kv, Watcher: kv, Layout: keys.For(cluster, ""), Partitions: rc.Partitions, Log: cfg.Logger, Clock: clock.Real()}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lst, err := r.List(ctx)
	require.NoError(t, err)
	return newObserver(r, cfg, lst)
}

// SetReaderKV makes o read etcd through kv.
func SetReaderKV(o *Observer, kv clientv3.KV) { o.reader.KV = kv }

// Check is Action.check.
func (a Action) Check(needReason bool) error { return a.check(needReason) }

// LookupAt is Operator.Lookup of each key on the fleet as etcd held it at
// rev, read once.
func LookupAt(ctx context.Context, o *Operator, keys []string, rev int64) ([]PartitionStatus, error) {
	v, err := o.viewAt(ctx, rev)
	if err != nil {
		return nil, err
	}
	out := make([]PartitionStatus, len(keys))
	for i, key := range keys {
		out[i] = v.partition(v.fleet.Shape.Of(key))
	}
	return out, nil
}

// ResizeStopping returns opts with the driver's test hook: stop is called
// after each step that wrote (a step's name: "start", "abort", "moving"),
// and false stops the driver there with ErrResizeStopped.
func ResizeStopping(opts ResizeOptions, stop func(step string) bool) ResizeOptions {
	opts.step = stop
	return opts
}

// ErrResizeStopped is what a driver stopped by its test hook returns.
var ErrResizeStopped = errStopped
