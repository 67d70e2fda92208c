package ownership

import (
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/keys"
)

// A resize of the partition count (fleet.Operator.Resize) moves its groups
// as planned moves: the holders of a moving group's active partitions (its
// sources; its targets when an aborting resize moves it back) hand them
// off and nobody claims them again (Shape.Leaving), and once none of them
// is claimed any node that sees so changes the group's phase (phaseTxn),
// after which the other side is claimed by the ring of its count. Every
// node tries the transaction, the holders that released among them, so
// that neither a driver that stopped nor a holder that crashed stalls a
// group; its comparisons make it idempotent. The first holder of the new
// side that has retired the replaced partitions at every fencer marks the
// group fenced (fencedTxn), which the resize waits for before it ends.

// moveGroups starts the phase transaction of every moving group whose
// active partitions are all unclaimed, and the fenced transaction of every
// group this node has retired the replaced partitions of, as this node
// knows the claims.
func (l *loop) moveGroups() {
	s := l.fleet.Shape
	if s.Resize == nil || l.resyncing || l.lost != nil {
		clear(l.movingSeen)
		return
	}
	for g := range l.movingSeen {
		if !s.Moving[g] {
			delete(l.movingSeen, g)
		}
	}
	for g := range s.Moving {
		if _, ok := l.movingSeen[g]; !ok {
			l.movingSeen[g] = l.n.clock.Now()
		}
		ended := s.Sources(g)
		if s.Aborting() {
			ended = s.Targets(g)
		}
		if s.IsDone(g) != s.Aborting() || l.groupsInFlight[g] || !l.unclaimed(ended) {
			continue
		}
		l.groupsInFlight[g] = true
		l.runGroupTxn(s, g, l.phaseOps(s, g), l.movingSeen[g], false)
	}
	l.markFenced(s)
}

// unclaimed reports whether none of ps is claimed or held by this node.
func (l *loop) unclaimed(ps []int) bool {
	for _, p := range ps {
		if p < len(l.fleet.Claims) && l.fleet.Claims[p].Epoch != 0 || l.rec(p).phase != phaseIdle {
			return false
		}
	}
	return true
}

// markFenced starts the fenced transaction of each group of s that
// changed phase, is not marked fenced, and has a partition this node
// serves under a tenure that retired the group's replaced partitions at
// the group's current change.
func (l *loop) markFenced(s *fleetview.Shape) {
	for p := range l.n.slots.len() {
		rec := l.rec(p)
		if !rec.served() || len(rec.t.retire) == 0 {
			continue
		}
		g := s.Group(p)
		_, rev := s.Replaced(p)
		if rev == 0 || rec.t.retire[0].Epoch != rev || s.Fenced[g] || l.groupsInFlight[g] {
			continue
		}
		l.groupsInFlight[g] = true
		l.runGroupTxn(s, g, l.fencedOps(s, g, rev), time.Time{}, true)
	}
}

// runGroupTxn runs the transaction t of group g, whose moving key this
// node saw at seen, and posts its result.
func (l *loop) runGroupTxn(s *fleetview.Shape, g int, t groupTxn, seen time.Time, fenced bool) {
	n, gen := l.n, l.gen
	n.spawn(func() {
		ctx, cancel := n.withTimeout(gen.ctx, gen.sess.TTL())
		defer cancel()
		resp, err := n.cli.Txn(ctx).If(t.cmps...).Then(t.then...).Commit()
		m := groupDone{shape: s, g: g, seen: seen, fenced: fenced, err: err}
		if err == nil {
			m.ok, m.rev = resp.Succeeded, resp.Header.Revision
		}
		n.post(gen, m)
	})
}

// groupTxn is a transaction on a group of a resize.
type groupTxn struct {
	cmps []clientv3.Cmp
	then []clientv3.Op
}

// fencedOps returns the transaction that marks group g fenced: if the
// spec is still s's and g's current change is the one at rev, it creates
// g's fenced key.
func (l *loop) fencedOps(s *fleetview.Shape, g int, rev int64) groupTxn {
	lay, id := l.n.layout, s.Resize.ID
	change := lay.ResizeDone(id, g)
	if s.Aborting() && !s.IsDone(g) {
		change = lay.ResizeBack(id, g)
	}
	return groupTxn{
		cmps: []clientv3.Cmp{
			clientv3.Compare(clientv3.ModRevision(lay.Spec()), "=", s.SpecRev),
			clientv3.Compare(clientv3.CreateRevision(change), "=", rev),
			clientv3.Compare(clientv3.CreateRevision(lay.ResizeFenced(id, g)), "=", 0),
		},
		then: []clientv3.Op{clientv3.OpPut(lay.ResizeFenced(id, g), "")},
	}
}

// phaseOps returns the transaction that changes group g's phase. Moving
// forward: if the spec is still s's (the resize is the one in progress),
// g's moving key stands, its done key does not, and none of its sources
// is claimed, it creates the done key and deletes the moving key. Moving
// back (an aborting resize): if the spec is still s's, g's moving and done
// keys stand and none of its targets is claimed, it deletes the done,
// moving and fenced keys and creates the back key. Either way it moves
// the placements from the partitions that end to those that begin: a
// split's children each take the parent's placement (a pin on a parent
// becomes a pin on each child), and a merge keeps the placement of the
// partition whose number the merged one has while the others' are
// deleted. Each placement it reads is compared at the revision this node
// knows, so that a pin changed meanwhile fails it.
func (l *loop) phaseOps(s *fleetview.Shape, g int) groupTxn {
	lay, id := l.n.layout, s.Resize.ID
	t := groupTxn{cmps: []clientv3.Cmp{
		clientv3.Compare(clientv3.ModRevision(lay.Spec()), "=", s.SpecRev),
		clientv3.Compare(clientv3.CreateRevision(lay.ResizeMoving(id, g)), ">", 0),
	}}
	ended, begun := s.Sources(g), s.Targets(g)
	if s.Aborting() {
		ended, begun = begun, ended
		t.cmps = append(t.cmps, clientv3.Compare(clientv3.CreateRevision(lay.ResizeDone(id, g)), ">", 0))
		t.then = append(t.then, clientv3.OpDelete(lay.ResizeDone(id, g)), clientv3.OpDelete(lay.ResizeMoving(id, g)),
			clientv3.OpDelete(lay.ResizeFenced(id, g)), clientv3.OpPut(lay.ResizeBack(id, g), ""))
	} else {
		t.cmps = append(t.cmps, clientv3.Compare(clientv3.CreateRevision(lay.ResizeDone(id, g)), "=", 0))
		t.then = append(t.then, clientv3.OpPut(lay.ResizeDone(id, g), ""), clientv3.OpDelete(lay.ResizeMoving(id, g)))
	}
	for _, p := range ended {
		t.cmps = append(t.cmps, clientv3.Compare(clientv3.CreateRevision(lay.Claim(p)), "=", 0))
	}
	place := func(p int) (fleetview.Placement, bool) {
		pl, ok := l.fleet.Placements[p]
		t.cmps = append(t.cmps, clientv3.Compare(clientv3.ModRevision(lay.Placement(p)), "=", pl.ModRev))
		return pl, ok
	}
	if len(ended) == 1 { // a split: every partition begun takes the one's placement
		parent, ok := place(g)
		for _, c := range begun {
			if c == g {
				continue
			}
			if _, had := place(c); ok {
				t.then = append(t.then, clientv3.OpPut(lay.Placement(c), keys.EncodePlacement(parent.Placement)))
			} else if had {
				t.then = append(t.then, clientv3.OpDelete(lay.Placement(c)))
			}
		}
		return t
	}
	for _, p := range ended { // a merge into g
		if p == g {
			continue
		}
		if _, had := place(p); had {
			t.then = append(t.then, clientv3.OpDelete(lay.Placement(p)))
		}
	}
	return t
}

// groupDone is the result of a group's transaction.
type groupDone struct {
	shape  *fleetview.Shape
	g      int
	seen   time.Time // when this node saw the group's moving key
	fenced bool      // the fenced transaction, else the phase one
	ok     bool
	rev    int64
	err    error
}

func (m groupDone) deliver(l *loop) { l.groupMoved(m) }

// groupMoved handles the result of a group's transaction: a phase change
// this node made is counted and logged; a failed comparison (another node
// made it first, a partition claimed, a placement changed) needs nothing:
// the watch brings the change, and the next reconciliation tries again if
// the group is still to move.
func (l *loop) groupMoved(m groupDone) {
	delete(l.groupsInFlight, m.g)
	l.dirty = true
	rs := m.shape.Resize
	switch {
	case m.err != nil:
		l.n.log.Warn("resize: group transaction", "resize", rs.ID, "group", m.g, "fenced", m.fenced, "error", m.err)
	case m.ok && m.fenced:
		l.n.log.Info("resize: group fenced", "resize", rs.ID, "group", m.g, "revision", m.rev)
	case m.ok:
		l.n.report.groupMoved(l.n.clock.Since(m.seen))
		ended, begun := m.shape.Sources(m.g), m.shape.Targets(m.g)
		step := "resize: group done"
		if m.shape.Aborting() {
			ended, begun, step = begun, ended, "resize: group moved back"
		}
		l.n.log.Info(step, "resize", rs.ID, "group", m.g, "from", rs.From, "to", rs.To,
			"ended", partitionRanges(ended), "begun", partitionRanges(begun), "revision", m.rev)
	}
}

// awaitShape holds this node's claims until its view of the fleet's shape
// reaches rev, the revision of a change of the shape that a claim made in
// shape claimedIn found (claimTxn): claiming before would fail again. If
// the watch has not brought it after a backoff (a spec written by other
// means than a resize is not watched), claims resume all the same.
func (l *loop) awaitShape(rev int64, claimedIn *fleetview.Shape) {
	if rev <= l.shapeWait {
		return
	}
	if l.shapeReached(rev) {
		if l.fleet.Shape != claimedIn {
			l.shapeRefusals = 0
			return // the view has moved on since the claim: claim again at once
		}
		// The view held the shape the claim found when it claimed, and
		// etcd refused the claim all the same: claiming at once would
		// fail again, so the claims wait for a backoff, and say why once.
		l.shapeRefusals++
		if l.shapeRefusals == 1 {
			l.n.log.Warn("claim refused by a fleet shape this node's view already holds; claiming again after a backoff",
				"revision", rev, "spec_revision", l.fleet.Shape.SpecRev, "seen", l.fleet.Rev)
		}
		l.claimAttempt = max(l.claimAttempt, l.shapeRefusals)
		l.holdClaims()
		return
	}
	l.shapeWait = rev
	l.n.after(l.gen, backoff(0), shapeWaitOver{rev: rev})
}

// shapeWaitOver ends the wait of awaitShape for rev, if it still waits.
type shapeWaitOver struct{ rev int64 }

func (m shapeWaitOver) deliver(l *loop) {
	if l.shapeWait == m.rev && !l.shapeReached(m.rev) {
		l.n.log.Warn("resize: the fleet's shape changed at a revision the watch has not brought; claiming again", "revision", m.rev, "seen", l.fleet.Rev)
		l.shapeWait = 0
		l.dirty = true
	}
}

// shapeReached reports whether this node's view of the fleet's shape has
// reached rev: the view holds every change up to its Rev (a consistent
// cut), or the spec it knows was written at rev or later.
func (l *loop) shapeReached(rev int64) bool {
	return rev <= l.fleet.Rev || rev <= l.fleet.Shape.SpecRev
}
