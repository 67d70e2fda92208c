package ownership

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jonboulle/clockwork"

	"github.com/tenure-go/tenure/internal/clock"
	"github.com/tenure-go/tenure/internal/etcderr"
	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/internal/nilness"
	"github.com/tenure-go/tenure/internal/retry"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
)

// Node is one process's membership in a cluster: it holds the process's
// Session, claims the partitions the ring gives it, serves them, and hands
// them off when the ring moves them. See the package documentation for the
// protocol.
//
// A Node is safe for concurrent use by multiple goroutines. Lookup,
// LookupPartition and Hold take no lock; Lookup and
// LookupPartition allocate nothing.
type Node struct {
	cfg Config
	cli Client
	// clientCtx is the etcd client's own context, if it has one (a
	// *clientv3.Client does): it ends when the client is closed.
	clientCtx context.Context
	layout    keys.Layout
	log       hclog.Logger
	clock     clockwork.Clock
	id        string

	// batchFencing is set if a fencer has AdvanceAll: the tenures
	// acquired together are fenced together.
	batchFencing bool

	reader *fleetview.Reader
	slots  slotTable // by partition: each one's record, written by the event loop (loop.transition)
	snap   atomic.Pointer[snapshot]
	disp   *dispatcher
	load   *loadMeter
	report *report // what happens to the node, in its log and metrics (report.go, metrics.go)
	trace  *tracer // the spans of its partitions' phases (trace.go); nil without Config.TracerProvider

	rootCtx    context.Context // cancelled when the node stops for good
	rootCancel context.CancelCauseFunc
	closeCtx   context.Context // cancelled when Close is called
	closeReq   context.CancelFunc

	msgs     chan envelope
	genSeq   atomic.Uint64
	wg       sync.WaitGroup
	loopDone chan struct{} // closed when the event loop has returned
	done     chan struct{} // closed when every goroutine has ended
	closeErr error         // written before done is closed
}

// Join registers this process as member cfg.NodeID of the cluster and starts
// serving: it opens a Session (the node's lease), creates the member key
// (failing with a *DuplicateMemberError if a live process holds the ID),
// reads the members and claims, and starts the event loop, which claims the
// partitions the ring gives this node. Join returns once the node is
// registered; partitions are acquired in the background and reported through
// Callbacks and Changed. ctx bounds Join only.
//
// A node ID held by a process that died stays taken until its lease expires
// (at most the session TTL).
func Join(ctx context.Context, cli Client, cfg Config) (*Node, error) {
	if nilness.Is(ctx) {
		return nil, fmt.Errorf("%w: context", ErrNilArgument)
	}
	if nilness.Is(cli) {
		return nil, fmt.Errorf("%w: etcd client", ErrNilArgument)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	layout := keys.For(cfg.Cluster, cfg.Prefix)
	log := cfg.Logger.With("node", cfg.NodeID)
	var spec fleetview.Spec
	err := etcderr.Reach(ctx, etcderr.FirstCall{What: "join " + cfg.NodeID, Log: log, Client: cli, Unavailable: ErrUnavailable}, func(ctx context.Context) (err error) {
		spec, err = fleetview.EnsureSpec(ctx, cli, layout, cfg.Ring, cfg.AdoptSpec)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := cfg.checkWeight(spec.RingAlgorithm, "the fleet "+layout.Prefix()+" records"); err != nil {
		return nil, err
	}
	cfg.Ring = spec.Config()
	n := &Node{
		cfg:       cfg,
		cli:       cli,
		clientCtx: clientContext(cli),
		layout:    layout,
		log:       log,
		clock:     cfg.Clock,
		id:        cfg.NodeID,
		load:      newLoadMeter(cfg.Ring.Partitions),
		trace:     newTracer(cfg.TracerProvider, layout.Prefix(), cfg.NodeID),
		disp:      newDispatcher(),
		msgs:      make(chan envelope, 256),
		loopDone:  make(chan struct{}),
		done:      make(chan struct{}),
	}
	n.slots.grow(cfg.Ring.Partitions)
	for _, f := range cfg.Fencers {
		if _, ok := f.(advanceAller); ok {
			n.batchFencing = true
		}
	}
	n.reader = &fleetview.Reader{KV: cli, Watcher: cli, Layout: n.layout, Partitions: cfg.Ring.Partitions, Log: n.log, Clock: n.clock}
	n.rootCtx, n.rootCancel = context.WithCancelCause(context.Background())
	n.closeCtx, n.closeReq = context.WithCancel(n.rootCtx)

	if n.report, err = newReport(n); err != nil {
		n.rootCancel(ErrClosed)
		n.closeReq()
		return nil, err
	}
	gen, lst, err := n.connect(ctx, 0)
	if err != nil {
		n.report.close()
		n.rootCancel(ErrClosed)
		n.closeReq()
		return nil, err
	}
	l := newLoop(n)
	l.install(gen, lst)
	l.publish()
	n.log.Info("joined", "lease", fmt.Sprintf("%x", int64(gen.lease)), "members", len(l.fleet.Members), "partitions", cfg.Ring.Partitions)
	go n.disp.run()
	if cfg.LoadInterval > 0 {
		n.spawn(n.publishLoad)
	}
	go n.run(l)
	return n, nil
}

// clientContext returns cli's own context if it has one, else nil.
func clientContext(cli Client) context.Context {
	if c, ok := cli.(interface{ Ctx() context.Context }); ok {
		return c.Ctx()
	}
	return nil
}

// run runs the event loop and then stops every goroutine of the node.
func (n *Node) run(l *loop) {
	err := l.run()
	n.rootCancel(ErrClosed)
	n.closeReq()
	close(n.loopDone)
	n.wg.Wait()
	n.disp.close()
	<-n.disp.done
	n.report.close()
	n.closeErr = err
	close(n.done)
}

// ID returns the node's ID.
func (n *Node) ID() string { return n.id }

// Lookup returns the route of key's partition. It takes no lock and does
// not allocate.
func (n *Node) Lookup(key string) fleet.Route {
	s := n.snap.Load()
	return s.route(s.shape.Of(key))
}

// LookupPartition returns the route of partition p. For p outside [0, P)
// it returns a Route with only Partition and RingVersion set.
func (n *Node) LookupPartition(p int) fleet.Route {
	s := n.snap.Load()
	if uint(p) >= uint(len(s.routes)) {
		return fleet.Route{Partition: p, RingVersion: s.ring.Version()}
	}
	return s.route(p)
}

// Hold admits local work for key: if this node serves key's partition, the
// work is counted as in flight until Held.Release and runs under the
// returned token and context (see Held for how a tenure ends under it).
// Otherwise Hold returns ErrClosed once the node is closed, or a
// *WrongOwnerError (errors.Is ErrNotOwner) that says why:
//
//   - SessionLost (errors.Is ErrLost): this node's session ended and the
//     node is rejoining; Owner names the partition's other known holder,
//     never this node, or is empty.
//   - Releasing (errors.Is ErrReleasing): this node is handing the
//     partition off; Owner names the next owner when known.
//   - Acquiring: this node is the partition's next owner and is still
//     acquiring it (claiming it, advancing its fencers, or waiting for
//     its OnAcquired to return); Owner is the previous owner while it
//     hands the partition off, else this node.
//   - otherwise: another node owns the partition, or nobody does yet; Owner
//     names it when known.
func (n *Node) Hold(key string) (Held, error) {
	s := n.snap.Load()
	return n.hold(s, s.shape.Of(key))
}

// HoldPartition is Hold for partition p. A p outside [0, P) yields an error
// wrapping fleet.ErrInvalidPartition.
func (n *Node) HoldPartition(p int) (Held, error) {
	s := n.snap.Load()
	if uint(p) >= uint(len(s.routes)) {
		return Held{}, fmt.Errorf("%w: %d not in [0, %d)", fleet.ErrInvalidPartition, p, len(s.routes))
	}
	return n.hold(s, p)
}

// hold admits work for p, or says why not, from the record of p that s
// published. Admission re-reads the partition's current record
// (tenure.enter); a record that has moved on since s was published is
// answered from the current one.
func (n *Node) hold(s *snapshot, p int) (Held, error) {
	e := &s.routes[p]
	rec := e.rec
	for rec.phase == phaseServing {
		t := rec.t
		if t.enter(rec) {
			n.load.add(p, 1)
			return Held{Partition: p, Token: t.token, Context: t.ctx, h: &hold{t: t}}, nil
		}
		cur := t.slot.load()
		if cur == rec || cur.t != t {
			rec = cur
			break
		}
		rec = cur // still serving t (a move of it began or was called off): admit under the current record
	}
	if s.closed {
		return Held{}, ErrClosed
	}
	err := &WrongOwnerError{Route: fleet.Route{Partition: p, RingVersion: s.ring.Version()}}
	if s.sessionEnded() {
		if !errors.Is(context.Cause(s.gen.ctx), ErrLost) {
			return Held{}, ErrClosed
		}
		r := s.route(p)
		err.SessionLost = true
		err.Owner, err.Addr, err.Epoch = r.Owner, r.Addr, r.Epoch
		return Held{}, err
	}
	if rec.releasing() {
		err.Releasing = true
		if e.next != n.id {
			err.Owner, err.Addr = e.next, e.nextAddr
		}
		return Held{}, err
	}
	err.Owner, err.Addr, err.Epoch = e.route.Owner, e.route.Addr, e.route.Epoch
	if e.next == n.id {
		err.Acquiring = true
		if err.Owner == "" { // unclaimed, or claimed by this node
			err.Owner, err.Addr = n.id, e.nextAddr
		}
	}
	return Held{}, err
}

// Changed returns a channel that is closed the next time the routing table
// changes (members, ring, claims or local states). Call it again after it
// fires for the next change.
func (n *Node) Changed() <-chan struct{} { return n.snap.Load().changed }

// Owned returns, in ascending order, the partitions this node serves:
// none once its session has ended, until it has rejoined.
func (n *Node) Owned() []int {
	s := n.snap.Load()
	if s.sessionEnded() {
		return nil
	}
	return slices.Clone(s.owned)
}

// Members returns the registered members, sorted by ID.
func (n *Node) Members() []fleet.Member {
	ms := slices.Clone(n.snap.Load().members)
	for i := range ms {
		ms[i].Meta = maps.Clone(ms[i].Meta)
	}
	return ms
}

// Ring returns the ring computed from the current members.
func (n *Node) Ring() *ring.Ring { return n.snap.Load().ring }

// Done returns a channel that is closed when the node has stopped, with
// every goroutine of the node ended: after Close, or on its own when its etcd
// client was closed under it (Close then returns an error wrapping
// ErrClientClosed).
func (n *Node) Done() <-chan struct{} { return n.done }

// Close leaves the cluster gracefully: it deletes the member key, so that
// every node's ring moves this node's partitions elsewhere, hands each
// partition off as in a move (serve on while the next owners prepare, all
// in parallel, within Config.WarmTimeout; then stop admitting, let the work in flight finish
// within Config.DrainTimeout, then cancel the partition's context, call
// OnReleased with ErrClosed and delete the claim), then revokes the
// lease. If ctx ends
// first, Close stops waiting: it cancels what remains, lets the lease go and
// returns an error wrapping ctx's error; the remaining partitions become
// free when the lease expires or is revoked.
//
// Close returns once every goroutine of the node has ended and every
// callback has returned. It is idempotent. It must not be called from a
// callback. A nil ctx is refused (ErrNilArgument) and closes nothing.
func (n *Node) Close(ctx context.Context) error {
	if nilness.Is(ctx) {
		return fmt.Errorf("%w: context", ErrNilArgument)
	}
	n.closeReq()
	select {
	case <-n.done:
		return n.closeErr
	case <-ctx.Done():
		n.rootCancel(fmt.Errorf("%w: %w", ErrClosed, context.Cause(ctx)))
		<-n.done
		if n.closeErr != nil {
			return n.closeErr
		}
		return fmt.Errorf("ownership: close %s: %w", n.id, context.Cause(ctx))
	}
}

// withTimeout is context.WithTimeout on the node's clock.
func (n *Node) withTimeout(parent context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	return clock.WithTimeout(parent, n.clock, d)
}

// sleep waits d on the node's clock; it reports false if ctx ended first.
func (n *Node) sleep(ctx context.Context, d time.Duration) bool {
	return clock.Sleep(ctx, n.clock, d)
}

// backoff returns the delay before retry number attempt (from 0) of the
// node's background work, on the retry.Node policy.
func backoff(attempt int) time.Duration { return retry.Node().Next(attempt + 1) }
