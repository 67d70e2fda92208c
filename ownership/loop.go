package ownership

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// phase is the local state of one partition, owned by the event loop:
//
//	idle -> claiming -> fencing (-> fenceWait -> fencing ...) -> serving
//	serving -> releasing (drain, OnReleased) -> deleting (-> deleteWait ...) -> idle
//	claiming/fencing/fenceWait, when the ring moves the partition away -> deleting
//	any, on loss -> idle (the claims go with the lease)
type phase uint8

const (
	phaseIdle       phase = iota
	phaseClaiming         // claim transaction in flight
	phaseFencing          // fencers running
	phaseFenceWait        // fencers failed; waiting to retry
	phaseServing          // admitting work
	phaseReleasing        // draining in-flight work, then OnReleased
	phaseDeleting         // claim deletion queued or in flight
	phaseDeleteWait       // claim deletion failed; waiting to retry
)

// fenceParallelism bounds the partitions whose fencers run at once.
const fenceParallelism = 16

// part is the event loop's state of one partition.
type part struct {
	phase    phase
	t        *tenure // claiming: nil; fencing to releasing: the tenure
	abort    bool    // fencing: the tenure ended; delete the claim when the fencers return
	attempts int     // failed fencing or deletion attempts in a row
	delEpoch int64   // deleting: epoch of the claim to delete
}

// loop is the event loop's state. Only the loop goroutine touches it.
type loop struct {
	n   *Node
	gen *generation

	members map[string]memberRec
	ids     []string // sorted member IDs of ring
	ring    *Ring
	me      int // index of this node in ring, -1 if absent

	claims  []claim // by partition
	lastRev []int64 // by partition: revision of the claim state known
	parts   []part  // by partition

	mch, cch  clientv3.WatchChan
	stopWatch context.CancelFunc
	resyncing bool

	batch          int // partitions per transaction
	claimsInFlight int
	claimHold      bool
	claimAttempt   int
	pendingDeletes []int
	pendingFences  []*tenure
	acquiredQ      []*tenure // serving, OnAcquired not yet queued
	releaseQ       []*tenure // released, drain not yet started

	closing        bool
	memberDeleting bool

	lost       error // set when the generation must end
	dirty      bool  // the snapshot is out of date
	warnedKeys bool
}

func newLoop(n *Node) *loop {
	p := n.cfg.Ring.Partitions
	return &loop{
		n:       n,
		members: make(map[string]memberRec),
		me:      -1,
		claims:  make([]claim, p),
		lastRev: make([]int64, p),
		parts:   make([]part, p),
		batch:   n.cfg.MaxTxnOps - 1,
	}
}

// install starts serving generation gen from its listing.
func (l *loop) install(gen *generation, lst *listing) {
	l.gen = gen
	l.lost = nil
	clear(l.lastRev)
	clear(l.claims)
	l.claimHold, l.claimAttempt, l.resyncing = false, 0, false
	l.applyListing(lst)
	l.watch(lst.rev + 1)
}

// run is the event loop. It returns when the node is closed.
func (l *loop) run() error {
	for {
		closed, err := l.serve()
		if closed {
			return err
		}
		l.n.log.Warn("session lost; all partitions released", "error", err)
		l.loseAll()
		if l.closing {
			// Close was handing off when the session ended: the remaining
			// claims go with the lease.
			ctx, cancel := l.n.withTimeout(l.n.rootCtx, l.gen.sess.TTL())
			_ = l.gen.sess.Close(ctx)
			cancel()
			l.publishClosed()
			return fmt.Errorf("ownership: close %s: session ended during the handoff: %w", l.n.id, err)
		}
		if err := l.rejoin(); err != nil {
			l.publishClosed()
			if errors.Is(err, ErrClosed) {
				return nil
			}
			return err
		}
	}
}

// serve handles events until the generation ends. It returns closed=true
// when the node is done (closed or aborted); otherwise err says why the
// generation ended.
func (l *loop) serve() (closed bool, err error) {
	n := l.n
	closeC := n.closeCtx.Done()
	if l.closing {
		closeC = nil
	}
	for {
		if l.lost != nil {
			return false, l.lost
		}
		l.reconcile()
		if l.dirty {
			l.publish()
		}
		l.fireAcquired()
		if l.closing && l.closeDone() {
			return true, l.finishClose()
		}
		select {
		case <-n.rootCtx.Done():
			l.abort()
			return true, nil
		case <-closeC:
			closeC = nil
			l.startClose()
		case <-l.gen.sess.Done():
			return false, l.gen.sess.Err()
		case resp, ok := <-l.mch:
			l.onWatch(resp, ok, true)
		case resp, ok := <-l.cch:
			l.onWatch(resp, ok, false)
		case m := <-n.msgs:
			l.handle(m)
		}
		// Take whatever else is ready before reconciling, so that a burst of
		// events costs one reconciliation and one snapshot.
	more:
		for range 512 {
			select {
			case resp, ok := <-l.mch:
				l.onWatch(resp, ok, true)
			case resp, ok := <-l.cch:
				l.onWatch(resp, ok, false)
			case m := <-n.msgs:
				l.handle(m)
			default:
				break more
			}
		}
	}
}

func (l *loop) handle(m message) {
	if m.gen == l.gen.id {
		m.f(l)
	}
}

// mine reports whether this node should hold partition p now.
func (l *loop) mine(p int) bool {
	return !l.closing && l.me >= 0 && l.ring.OwnerIndex(p) == l.me
}

// reconcile moves every partition towards what the ring and the claims
// say: claim what is mine and free, hand off what is no longer mine.
func (l *loop) reconcile() {
	var toClaim []int
	canClaim := !l.claimHold && !l.resyncing && l.lost == nil
	for p := range l.parts {
		ps := &l.parts[p]
		switch ps.phase {
		case phaseIdle:
			c := l.claims[p]
			switch {
			case c.epoch != 0 && c.owner == l.n.id && c.lease == l.gen.lease:
				// Ours, without a tenure: a claim transaction whose
				// response was lost but which committed.
				l.adopt(p, c.epoch)
			case c.epoch != 0 && c.owner == l.n.id:
				// Left by an earlier session of this node, whose work has
				// been cancelled.
				l.startDelete(p, c.epoch)
			case c.epoch == 0 && canClaim && l.mine(p):
				toClaim = append(toClaim, p)
			}
		case phaseFencing:
			if !ps.abort && !l.mine(p) {
				ps.abort = true
				ps.t.end(ReasonMoved)
			}
		case phaseFenceWait:
			if !l.mine(p) {
				ps.t.end(ReasonMoved)
				l.startDelete(p, ps.t.token.Epoch)
			}
		case phaseServing:
			if !l.mine(p) {
				l.release(p)
			}
		}
	}
	if len(toClaim) > 0 {
		l.launchClaims(toClaim)
	}
	l.flushReleases()
	l.flushDeletes()
	l.flushFences()
}

// adopt starts a tenure over p under the claim created at epoch.
func (l *loop) adopt(p int, epoch int64) {
	t := newTenure(l.gen.ctx, p, epoch)
	if !l.mine(p) {
		t.end(ReasonMoved)
		l.startDelete(p, epoch)
		return
	}
	l.parts[p] = part{phase: phaseFencing, t: t}
	l.dirty = true
	if len(l.n.cfg.Fencers) == 0 {
		l.serveTenure(t)
		return
	}
	l.pendingFences = append(l.pendingFences, t)
}

// serveTenure starts admitting work under t.
func (l *loop) serveTenure(t *tenure) {
	ps := &l.parts[t.p]
	ps.phase, ps.attempts = phaseServing, 0
	t.state.Store(tenureServing)
	t.acquired.Store(true)
	l.acquiredQ = append(l.acquiredQ, t)
	l.dirty = true
}

// fireAcquired queues OnAcquired for the tenures that started serving, once
// the snapshot that shows them served is published: when OnAcquired runs,
// Lookup reports the partition Local and Hold admits work. A tenure that
// has already ended by then still gets its OnAcquired, and its OnReleased
// after it.
func (l *loop) fireAcquired() {
	if len(l.acquiredQ) == 0 {
		return
	}
	for _, t := range l.acquiredQ {
		l.n.fireAcquired(t)
	}
	clear(l.acquiredQ)
	l.acquiredQ = l.acquiredQ[:0]
}

// flushAcquired publishes and queues the pending OnAcquired callbacks. It
// runs before any tenure's end is reported, so that OnAcquired always
// precedes OnReleased.
func (l *loop) flushAcquired() {
	if len(l.acquiredQ) > 0 {
		l.publish()
		l.fireAcquired()
	}
}

// flushFences advances the fencers of the queued tenures.
func (l *loop) flushFences() {
	if len(l.pendingFences) == 0 {
		return
	}
	n, gen, ts := l.n, l.gen, l.pendingFences
	l.pendingFences = nil
	n.spawn(func() {
		sem := make(chan struct{}, fenceParallelism)
		var wg sync.WaitGroup
		for _, t := range ts {
			sem <- struct{}{}
			wg.Go(func() {
				defer func() { <-sem }()
				err := n.advance(t)
				n.post(gen, func(l *loop) { l.fenced(t, err) })
			})
		}
		wg.Wait()
	})
}

// advance runs every fencer for t, in order.
func (n *Node) advance(t *tenure) error {
	for i, f := range n.cfg.Fencers {
		if err := t.ctx.Err(); err != nil {
			return context.Cause(t.ctx)
		}
		if err := f.Advance(t.ctx, t.token); err != nil {
			return fmt.Errorf("fencer %d: %w", i, err)
		}
	}
	return nil
}

// fenced handles the result of advancing t's fencers.
func (l *loop) fenced(t *tenure, err error) {
	ps := &l.parts[t.p]
	if ps.t != t || ps.phase != phaseFencing {
		return
	}
	l.dirty = true
	switch {
	case ps.abort || t.ctx.Err() != nil:
		if l.holds(t.p, t) {
			l.startDelete(t.p, t.token.Epoch)
		} else {
			*ps = part{}
		}
	case err != nil:
		ps.phase = phaseFenceWait
		ps.attempts++
		l.n.log.Warn("advance fencers; the partition stays unserved until they succeed",
			"partition", t.p, "epoch", t.token.Epoch, "error", err, "attempt", ps.attempts)
		l.n.after(l.gen, backoff(ps.attempts-1), func(l *loop) {
			if ps := &l.parts[t.p]; ps.t == t && ps.phase == phaseFenceWait {
				ps.phase = phaseFencing
				l.pendingFences = append(l.pendingFences, t)
			}
		})
	default:
		l.serveTenure(t)
	}
}

// release hands p off: no new work, cancel, then drain on another
// goroutine.
func (l *loop) release(p int) {
	l.flushAcquired()
	ps := &l.parts[p]
	t := ps.t
	ps.phase = phaseReleasing
	r := ReasonMoved
	if l.closing {
		r = ReasonClosed
	}
	t.end(r)
	l.dirty = true
	l.releaseQ = append(l.releaseQ, t)
}

// flushReleases drains the tenures released by reconcile.
func (l *loop) flushReleases() {
	if len(l.releaseQ) == 0 {
		return
	}
	n, gen, ts := l.n, l.gen, l.releaseQ
	l.releaseQ = nil
	n.spawn(func() { n.drain(gen, ts) })
}

// drained handles the end of t's drain: delete its claim.
func (l *loop) drained(t *tenure) {
	if ps := &l.parts[t.p]; ps.t == t && ps.phase == phaseReleasing {
		l.startDelete(t.p, t.token.Epoch)
	}
}

// loseAll ends the generation: every tenure ends at once with ReasonLost.
// The claims go with the lease.
func (l *loop) loseAll() {
	l.unwatch()
	l.gen.end(ErrLost)
	ended := l.endAll(ReasonLost)
	l.claimsInFlight = 0
	l.pendingDeletes, l.pendingFences, l.releaseQ = nil, nil, nil
	l.memberDeleting = false
	l.publish()
	l.fireAcquired()
	for _, t := range ended {
		l.n.fireReleased(t)
	}
}

// endAll ends every tenure of this node for reason r at once, clears every
// partition's state and returns the tenures it ended.
func (l *loop) endAll(r Reason) []*tenure {
	var ended []*tenure
	for p := range l.parts {
		if t := l.parts[p].t; t != nil {
			t.end(r)
			ended = append(ended, t)
		}
		l.parts[p] = part{}
	}
	return ended
}

// rejoin opens a new generation, retrying with backoff. It returns an error
// wrapping ErrClosed if the node was closed first, or ErrClientClosed if
// the etcd client was.
func (l *loop) rejoin() error {
	n := l.n
	old := l.gen.sess
	if err := n.clientErr(nil); err != nil {
		return err
	}
	// Revoke the old lease if etcd can be reached; if not, connect revokes
	// it before it opens the next session.
	stale := old.Lease()
	ctx, cancel := n.withTimeout(n.closeCtx, old.TTL())
	if old.Close(ctx) == nil {
		stale = 0
	}
	cancel()
	for attempt := 0; ; attempt++ {
		if n.closeCtx.Err() != nil {
			return ErrClosed
		}
		if err := n.clientErr(nil); err != nil {
			return err
		}
		ctx, cancel := n.withTimeout(n.closeCtx, old.TTL())
		gen, lst, err := n.connect(ctx, stale)
		cancel()
		if err == nil {
			l.install(gen, lst)
			n.log.Info("rejoined", "lease", fmt.Sprintf("%x", int64(gen.lease)), "attempt", attempt)
			return nil
		}
		if n.closeCtx.Err() != nil {
			return ErrClosed
		}
		if cerr := n.clientErr(err); cerr != nil {
			return cerr
		}
		var dup *DuplicateMemberError
		switch {
		case errors.As(err, &dup):
			n.log.Error("rejoin: the node ID is taken by another process", "error", err, "attempt", attempt)
		default:
			n.log.Warn("rejoin", "error", err, "attempt", attempt)
		}
		if !n.sleep(n.closeCtx, backoff(attempt)) {
			return ErrClosed
		}
	}
}

// clientErr returns an error wrapping ErrClientClosed if the node's etcd
// client has been closed, as its context (for a *clientv3.Client) or err,
// the error of a call through it, shows; nil if not.
func (n *Node) clientErr(err error) error {
	if n.clientCtx != nil && n.clientCtx.Err() != nil || err != nil && clientClosed(err) {
		if err == nil {
			err = context.Cause(n.clientCtx)
		}
		n.log.Error("etcd client closed under the node; stopping", "error", err)
		return fmt.Errorf("ownership: node %s: %w", n.id, ErrClientClosed)
	}
	return nil
}

// clientClosed reports whether err is the error of a call through an etcd
// client that has been closed: gRPC's Canceled status for a closing client
// connection, which the etcd client passes on unchanged when the call's own
// context is still live.
func clientClosed(err error) bool {
	var gs interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &gs) {
		return false
	}
	s := gs.GRPCStatus()
	return s.Code() == codes.Canceled && s.Message() == clientClosingMessage
}

// clientClosingMessage is the message of gRPC's error for a call on a
// closing client connection (grpc.ErrClientConnClosing).
const clientClosingMessage = "grpc: the client connection is closing"

// startClose begins a graceful leave: delete the member key, so that every
// node's ring (this one's too) moves this node's partitions away, and hand
// every partition off.
func (l *loop) startClose() {
	l.closing = true
	l.dirty = true
	l.memberDeleting = true
	n, gen := l.n, l.gen
	n.spawn(func() {
		ctx, cancel := n.withTimeout(gen.ctx, gen.sess.TTL())
		defer cancel()
		mk := n.layout.Member(n.id)
		_, err := n.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(mk), "=", gen.memberRev)).
			Then(clientv3.OpDelete(mk)).
			Commit()
		n.post(gen, func(l *loop) {
			l.memberDeleting = false
			if err != nil {
				n.log.Warn("delete member key; revoking the lease will", "error", err)
			}
		})
	})
}

// closeDone reports whether a graceful leave has handed everything off.
func (l *loop) closeDone() bool {
	if l.memberDeleting || l.claimsInFlight > 0 {
		return false
	}
	for i := range l.parts {
		if l.parts[i].phase != phaseIdle {
			return false
		}
	}
	return true
}

// finishClose revokes the lease and publishes the final snapshot.
func (l *loop) finishClose() error {
	l.unwatch()
	err := l.gen.sess.Close(l.n.rootCtx)
	l.gen.end(ErrClosed)
	l.publishClosed()
	if err != nil {
		return fmt.Errorf("ownership: close %s: %w", l.n.id, err)
	}
	l.n.log.Info("left the cluster")
	return nil
}

// abort stops at once (Close's context ended): every tenure ends with
// ReasonClosed, and the lease is left to expire (or revoked if etcd answers
// at once).
func (l *loop) abort() {
	l.unwatch()
	ended := l.endAll(ReasonClosed)
	l.gen.end(ErrClosed)
	l.publishClosed()
	l.fireAcquired()
	for _, t := range ended {
		l.n.fireReleased(t)
	}
	// Revoke the lease if etcd answers at once; otherwise it expires.
	ctx, cancel := l.n.withTimeout(context.Background(), 100*time.Millisecond)
	_ = l.gen.sess.Close(ctx)
	cancel()
}

// publish builds the routing snapshot from the loop's state and publishes
// it.
func (l *loop) publish() {
	l.dirty = false
	l.store(l.build(false))
}

func (l *loop) publishClosed() {
	l.store(l.build(true))
}

func (l *loop) store(s *snapshot) {
	if old := l.n.snap.Swap(s); old != nil {
		close(old.changed)
	}
}

func (l *loop) build(closed bool) *snapshot {
	s := &snapshot{
		ring:    l.ring,
		routes:  make([]entry, len(l.parts)),
		closed:  closed,
		changed: make(chan struct{}),
	}
	version := l.ring.Version()
	addrs := make([]string, len(l.ids))
	for i, id := range l.ids {
		addrs[i] = l.members[id].m.Addr
	}
	addrOf := func(id string) string {
		if i, ok := slices.BinarySearch(l.ids, id); ok {
			return addrs[i]
		}
		return ""
	}
	for p := range s.routes {
		e := &s.routes[p]
		if i := l.ring.OwnerIndex(p); i >= 0 {
			e.next, e.nextAddr = l.ids[i], addrs[i]
		}
		e.route = Route{Partition: p, Owner: e.next, Addr: e.nextAddr, RingVersion: version}
		if c := l.claims[p]; c.epoch != 0 {
			e.route.Owner, e.route.Addr, e.route.Epoch = c.owner, addrOf(c.owner), c.epoch
		}
		if closed {
			continue
		}
		switch ps := &l.parts[p]; ps.phase {
		case phaseServing:
			e.t, e.route.Local = ps.t, true
			s.owned = append(s.owned, p)
		case phaseReleasing, phaseDeleting, phaseDeleteWait:
			e.releasing = true
		}
	}
	s.members = make([]Member, 0, len(l.ids))
	for _, id := range l.ids {
		s.members = append(s.members, l.members[id].m)
	}
	return s
}
