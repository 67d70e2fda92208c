package fleet

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"

	"github.com/hashicorp/go-hclog"
	"github.com/jonboulle/clockwork"

	"github.com/tenure-go/tenure/internal/clock"
	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/internal/nilness"
	"github.com/tenure-go/tenure/internal/signal"
	"github.com/tenure-go/tenure/ownership/ring"
)

// ObserverConfig configures an Observer. Cluster (or Prefix) and Ring are
// required; Ring must agree with the fleet's spec.
type ObserverConfig struct {
	// Cluster selects the key prefix "/tenure/<Cluster>/" of the fleet.
	// It must not contain '/' or NUL, as ownership.Config.Cluster.
	Cluster string
	// Prefix, if set, is used instead of the prefix derived from Cluster.
	// It must not contain NUL.
	Prefix string
	// Ring is the fleet's ring configuration: its partition count and load
	// factor must be the spec's, and its Algorithm the spec's or unset
	// (zero, the usual), which adopts the spec's.
	Ring ring.Config
	// Logger receives the observer's diagnostics. Nil discards them.
	Logger hclog.Logger
	// Clock times the retries of reads after a watch failed. Nil means the
	// real clock.
	Clock clockwork.Clock
}

// Validate reports whether c can configure an Observer. Errors wrap
// ErrInvalidConfig; an invalid partition count or load factor also wraps
// ring.ErrInvalidPartitions or ring.ErrInvalidLoadFactor.
func (c ObserverConfig) Validate() error {
	if err := keys.CheckFleet(c.Cluster, c.Prefix); err != nil {
		return fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	if err := c.Ring.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidConfig, err)
	}
	return nil
}

// Observer follows a fleet's members and claims from outside the fleet,
// read-only and without a lease, with the same reader and the same decoding
// rules as the fleet's nodes: it reads both at one revision, watches them
// from the next, and reads them again after a compaction or a failed watch.
// It keeps an immutable routing table that Lookup and LookupPartition
// read without locking.
// An Observer is safe for concurrent use by multiple goroutines.
type Observer struct {
	reader *fleetview.Reader
	fleet  *fleetview.State // owned by the goroutine of run

	table   atomic.Pointer[table]
	highest []int64       // by partition: the newest claim epoch ever seen; owned by publish's caller
	reads   chan struct{} // Verify's etcd reads in flight (see maxVerifyReads)
	changed signal.Signal // notified on every published table
	resyncs atomic.Int64

	cancel context.CancelFunc
	done   chan struct{}
}

// table is an Observer's immutable routing table, with the claims Verify
// checks tokens against.
type table struct {
	rev    int64
	shape  *fleetview.Shape // the rule of key -> partition
	routes []Route
	claims claimEpochs
}

// Observe reads the fleet's spec, members and claims through etcd, bounded
// by ctx, and returns an Observer that keeps following the members and
// claims until Close. Errors wrap ErrNilArgument, ErrInvalidConfig (see
// Validate), ring.ErrSpecMismatch (cfg.Ring contradicts the fleet's spec;
// the error is a *ring.SpecMismatchError), ErrNoSpec (the fleet has no
// spec yet and cfg.Ring.Algorithm is unset: which algorithm the fleet will
// record is not known), ring.ErrInvalidSpec, ring.ErrSpecMismatch (a claim
// for a partition outside [0, cfg.Ring.Partitions) exists) or the etcd
// error.
func Observe(ctx context.Context, etcd FleetClient, cfg ObserverConfig) (*Observer, error) {
	if nilness.Is(etcd) {
		return nil, fmt.Errorf("%w: etcd client", ErrNilArgument)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Logger == nil {
		cfg.Logger = hclog.NewNullLogger()
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real()
	}
	layout := keys.For(cfg.Cluster, cfg.Prefix)
	rc, err := specRing(ctx, etcd, layout, cfg.Ring)
	if err != nil {
		return nil, err
	}
	cfg.Ring = rc
	r := &fleetview.Reader{KV: etcd, Watcher: etcd, Layout: layout, Partitions: cfg.Ring.Partitions, Log: cfg.Logger, Clock: cfg.Clock}
	lst, err := r.List(ctx)
	if err != nil {
		return nil, err
	}
	if lst.Outside > 0 {
		return nil, fmt.Errorf("%w: %d claims for partitions >= %d under %q", ring.ErrSpecMismatch, lst.Outside, cfg.Ring.Partitions, layout.Prefix())
	}
	o := newObserver(r, cfg, lst)
	runCtx, cancel := context.WithCancel(context.Background())
	o.cancel = cancel
	go o.run(runCtx, lst.Rev)
	return o, nil
}

// specRing returns the ring configuration an Observer configured with rc
// uses in the fleet layout names: the spec's, if rc agrees with it; rc, if
// the fleet has no spec yet and rc sets its algorithm.
func specRing(ctx context.Context, kv FleetClient, layout keys.Layout, rc ring.Config) (ring.Config, error) {
	resp, err := kv.Get(ctx, layout.Spec())
	if err != nil {
		return ring.Config{}, fmt.Errorf("fleet: read the fleet's spec: %w", err)
	}
	var spec fleetview.Spec
	if len(resp.Kvs) == 0 {
		err = fmt.Errorf("%w at %s", ErrNoSpec, layout.Spec())
	} else {
		spec, err = fleetview.DecodeStored(resp.Kvs[0].Value, resp.Kvs[0].ModRevision)
	}
	switch {
	case err == nil:
		if err := fleetview.CompareSpec(spec, rc); err != nil {
			return ring.Config{}, fmt.Errorf("fleet: observe %s: %w", layout.Prefix(), err)
		}
		return spec.Config(), nil
	case errors.Is(err, ErrNoSpec) && rc.Algorithm != 0:
		return rc, nil
	case errors.Is(err, ErrNoSpec):
		return ring.Config{}, fmt.Errorf("%w (set the ring algorithm to observe a fleet no node has joined)", err)
	}
	return ring.Config{}, err
}

// newObserver returns an Observer of the fleet r reads, with the view of
// lst published, that follows nothing yet.
func newObserver(r *fleetview.Reader, cfg ObserverConfig, lst *fleetview.Listing) *Observer {
	o := &Observer{reader: r, fleet: fleetview.NewState(cfg.Ring, cfg.Logger), done: make(chan struct{}),
		highest: make([]int64, cfg.Ring.Partitions), reads: make(chan struct{}, maxVerifyReads)}
	o.fleet.Apply(fleetview.Update{Listing: lst})
	o.publish()
	return o
}

// run follows the fleet after revision rev until ctx ends.
func (o *Observer) run(ctx context.Context, rev int64) {
	defer close(o.done)
	o.reader.Follow(ctx, rev, 0, func(u fleetview.Update) bool {
		if u.Stale {
			return true
		}
		if u.Listing != nil && !u.CatchUp {
			o.resyncs.Add(1)
		}
		o.fleet.Apply(u)
		o.publish()
		return true
	})
}

// publish builds the routing table from the fleet, by the fleet's one
// route rule (fleetview.State.Route), and publishes it.
func (o *Observer) publish() {
	f := o.fleet
	t := &table{rev: f.Rev, shape: f.Shape, routes: make([]Route, f.Shape.Max()), claims: o.claimEpochs()}
	for p := range t.routes {
		t.routes[p] = routeOf(f.Route(p))
	}
	o.table.Store(t)
	o.changed.Notify()
}

// LookupPartition returns the route of partition p, computed by the rule
// every Node of the fleet routes with: the holder of p's claim while one
// stands (with an empty Addr if the holder published none: it alone can
// admit p's work until its claim ends), otherwise the ring's owner of p,
// which is about to claim it. For p outside [0, P) it returns the Route
// with only Partition set. It takes no lock and does not allocate.
func (o *Observer) LookupPartition(p int) Route {
	t := o.table.Load()
	if uint(p) >= uint(len(t.routes)) {
		return Route{Partition: p}
	}
	return t.routes[p]
}

// Lookup returns the route of key's partition (ring.PartitionOf with the
// fleet's partition count), as LookupPartition does. It takes no lock and
// does not allocate.
func (o *Observer) Lookup(key string) Route {
	t := o.table.Load()
	return t.routes[t.shape.Of(key)]
}

// Revision returns the etcd revision the Observer's view of the fleet is
// at: the view holds every change of the fleet's members, drain marks,
// claims, placements and spec up to it and none after it, so two readers
// at one revision route every key alike.
func (o *Observer) Revision() int64 { return o.table.Load().rev }

// Changed returns a channel that is closed the next time the Observer's
// view of the fleet changes.
func (o *Observer) Changed() <-chan struct{} { return o.changed.Changed() }

// Resyncs returns the number of times the Observer read the fleet again
// after its watch failed (a compaction past the revision it resumes from, a
// broken watch). The one read that catches up when its watch starts past
// the revision it listed is no resync.
func (o *Observer) Resyncs() int64 { return o.resyncs.Load() }

// Close stops following the fleet and waits for the Observer's goroutine to
// end. It is idempotent.
func (o *Observer) Close() {
	o.cancel()
	<-o.done
}
