package ownership

import (
	"context"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/watchstream"
)

// The holder's side of a warm handoff: when the ring moves a partition
// away, reconcile does not release it at once (moveAway): the partition
// keeps serving, its record marked with the move, until the successors'
// readiness keys name the epochs of every partition of its move
// (followReady keeps the node's view of those keys) or the warm timeout
// of the move has passed (warmExpired); then the partitions of the move
// are released together (releaseMoves), as any planned move is
// (release.go): one write check, one hand-over transaction per batch,
// and one fencing call per successor, however the preparations ended
// spread over time. If the ring gives a partition back meanwhile, its
// move is called off. A holder whose session ends meanwhile loses the
// partition as always: a crash is a failover, never a warm move.

// move is the prepare phase of the planned moves away that one
// reconciliation started: the partitions whose records carry it keep
// serving until their successor is ready, or until deadline. They are one
// handoff batch from the start of the move: logged in one line once the
// last has been handed off (or lost, or kept).
type move struct {
	since    time.Time
	deadline time.Time
	batch    *handoff
	expired  bool // the warm timeout passed: its partitions go on cold
}

// readyKey names a readiness key: node is ready to take partition p over.
type readyKey struct {
	p    int
	node string
}

// waiting is a partition of a move away that a reconciliation found
// serving (moveAway): ready if its successor is ready for its epoch.
type waiting struct {
	p     int
	m     *move
	ready bool
}

// moveAway moves p, which this node serves (rec) and the ring gives to
// another node, towards its handoff: it starts the move's prepare phase,
// and queues p for releaseMoves, which releases it with the rest of its
// move; it releases p at once if the prepare phase is off, nobody is
// next, the successor does not prepare (its member value says so), or a
// resize of the partition count asks p to move (Shape.Leaving): nobody
// claims p again, so nobody prepares it.
func (l *loop) moveAway(p int, rec *record) {
	to, ok := l.successor(p)
	if !ok {
		if l.mayRelease() {
			l.release(p, rec.move, false)
		}
		return
	}
	m := rec.move
	if m == nil {
		if l.started == nil {
			now := l.n.clock.Now()
			l.started = &move{since: now, deadline: now.Add(l.n.cfg.WarmTimeout), batch: l.newHandoff()}
			l.n.after(l.gen, l.n.cfg.WarmTimeout, warmExpired{m: l.started})
		}
		m = l.started
		m.batch.pending++
		rec = &record{phase: phaseServing, t: rec.t, move: m, handoff: m.batch}
		l.transition(p, rec, 0)
	}
	l.waiting = append(l.waiting, waiting{p: p, m: m, ready: l.ready[readyKey{p: p, node: to}] == rec.t.token.Epoch})
}

// releaseMoves releases the partitions of the moves away that this
// reconciliation found serving (moveAway), a move at a time: all of a
// move's together, once the successor of each is ready for its epoch, or
// once the move's warm timeout has passed (the partitions not ready go on
// cold). Every partition of a move that still moves away is visited by
// each reconciliation, so the partitions of a move that wait are all
// there. Until then the holder serves them all: the wait for the last
// preparation costs clients nothing, and the move costs one write check,
// one hand-over transaction per batch, and one fencing call per
// successor, not one of each per readiness.
func (l *loop) releaseMoves() {
	if len(l.waiting) == 0 {
		return
	}
	unready := map[*move]bool{}
	for _, w := range l.waiting {
		if !w.ready && !w.m.expired {
			unready[w.m] = true
		}
	}
	for _, w := range l.waiting {
		if !unready[w.m] && l.mayRelease() {
			l.release(w.p, w.m, w.ready)
		}
	}
	l.waiting = l.waiting[:0]
}

// successor returns the node that prepares p, which the ring gives to
// another node, before p moves to it: none if the prepare phase is off,
// nobody is next, a resize asks p to move, or the next owner does not
// prepare (moveAway).
func (l *loop) successor(p int) (string, bool) {
	to, ok := l.fleet.Owner(p)
	if !l.n.warmEnabled() || !ok || l.fleet.Shape.Leaving(p) || !l.fleet.Members[to].Member.Prepares {
		return "", false
	}
	return to, true
}

// awaitsSuccessor reports whether p, which this node claimed and is
// fencing or starting (rec) when the ring gives it to another node, waits
// for the successor's readiness for its epoch before it is let go: a
// partition handed to this node a moment before a node joins (a rolling
// restart: the process that left comes back) would otherwise be released
// at once, and its successor, which saw this node's claim and began to
// prepare, would claim it cold. It admits no work meanwhile: it becomes
// serving as always (OnAcquired returned, or the acquired timeout passed),
// and then moveAway bounds the wait by the warm timeout.
func (l *loop) awaitsSuccessor(p int, rec *record) bool {
	to, ok := l.successor(p)
	return ok && !l.closing && l.ready[readyKey{p: p, node: to}] != rec.t.token.Epoch
}

// keepServing calls off the move of p (rec): the ring gives it back to
// this node.
func (l *loop) keepServing(p int, rec *record) {
	l.transition(p, &record{phase: phaseServing, t: rec.t}, 0)
}

// warmExpired marks m's warm timeout passed: the next reconciliation
// releases, cold, the partitions of m whose successor did not get ready
// (moveAway).
func (l *loop) warmExpired(m *move) {
	m.expired = true
	l.dirty = true
}

// followReady keeps the event loop's view of the readiness keys for
// generation gen: it reads them all (readyListed), watches them from the
// next revision (readyChanged), and reads them again when the watch
// fails, until the generation ends.
func (n *Node) followReady(gen *generation) {
	prefix := n.layout.ReadyPrefix()
	for attempt := 0; gen.ctx.Err() == nil; attempt++ {
		ctx, cancel := n.withTimeout(gen.ctx, gen.sess.TTL())
		resp, err := n.cli.Get(ctx, prefix, clientv3.WithPrefix())
		cancel()
		if err != nil {
			if !n.sleep(gen.ctx, backoff(attempt)) {
				return
			}
			continue
		}
		attempt = -1
		all := make(map[readyKey]int64, len(resp.Kvs))
		for _, kv := range resp.Kvs {
			if k, epoch, ok := n.readyOf(kv.Key, kv.Value); ok {
				all[k] = epoch
			}
		}
		n.post(gen, readyListed{all: all})
		n.watchReady(gen, prefix, resp.Header.Revision)
	}
}

// watchReady delivers the changes of the readiness keys after rev until
// the watch fails or gen ends.
func (n *Node) watchReady(gen *generation, prefix string, rev int64) {
	wctx, cancel := context.WithCancel(watchstream.Own(clientv3.WithRequireLeader(gen.ctx)))
	defer cancel()
	for resp := range n.cli.Watch(wctx, prefix, clientv3.WithPrefix(), clientv3.WithRev(rev+1)) {
		if resp.Err() != nil || resp.Canceled {
			return
		}
		m := readyChanged{set: map[readyKey]int64{}}
		for _, ev := range resp.Events {
			k, epoch, ok := n.readyOf(ev.Kv.Key, ev.Kv.Value)
			if !ok {
				continue
			}
			if ev.Type == clientv3.EventTypeDelete {
				epoch = 0
			}
			m.set[k] = epoch
		}
		n.post(gen, m)
	}
}

// readyOf decodes a readiness key-value; a value that is not an epoch
// (a deletion's) decodes as 0.
func (n *Node) readyOf(key, val []byte) (readyKey, int64, bool) {
	p, id, ok := n.layout.ReadyKey(string(key))
	if !ok || p >= n.slots.len() {
		return readyKey{}, 0, false
	}
	epoch, _ := strconv.ParseInt(string(val), 10, 64)
	return readyKey{p: p, node: id}, epoch, true
}
