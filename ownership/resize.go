package ownership

import (
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/keys"
)

// A resize of the partition count (fleet.Operator.Resize) moves its groups
// as planned moves: the holders of a moving group's source partitions hand
// them off and nobody claims them again (Shape.Leaving), and once none of
// them is claimed any node that sees so marks the group done (groupTxn),
// after which its target partitions are claimed by the ring of the target
// count. Every node tries the transaction, the holders that released the
// sources among them, so that neither a driver that stopped nor a source
// holder that crashed stalls a group; its comparisons make it idempotent.

// moveGroups starts the done transaction of every moving group whose
// source partitions are all unclaimed, as this node knows the claims.
func (l *loop) moveGroups() {
	s := l.fleet.Shape
	if s.Resize == nil || s.Resize.Aborting || l.resyncing || l.lost != nil {
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
		if s.IsDone(g) || l.groupsInFlight[g] {
			continue
		}
		free := true
		for _, p := range s.Sources(g) {
			if p < len(l.fleet.Claims) && l.fleet.Claims[p].Epoch != 0 || l.rec(p).phase != phaseIdle {
				free = false
				break
			}
		}
		if !free {
			continue
		}
		l.groupsInFlight[g] = true
		n, gen, ops := l.n, l.gen, l.groupOps(s, g)
		n.spawn(func() {
			ctx, cancel := n.withTimeout(gen.ctx, gen.sess.TTL())
			defer cancel()
			resp, err := n.cli.Txn(ctx).If(ops.cmps...).Then(ops.then...).Commit()
			m := groupDone{shape: s, g: g, err: err}
			if err == nil {
				m.ok, m.rev = resp.Succeeded, resp.Header.Revision
			}
			n.post(gen, m)
		})
	}
}

// groupTxn is the transaction that marks a group done.
type groupTxn struct {
	cmps []clientv3.Cmp
	then []clientv3.Op
}

// groupOps returns the transaction that marks group g of s's resize done:
// if the spec is still s's (the resize is the one in progress), g's moving
// key stands, its done key does not, and none of its source partitions is
// claimed, it creates the done key, deletes the moving key and moves the
// placements: a split's children each take the parent's placement (a pin
// on a parent becomes a pin on each child), and a merge's target keeps
// the placement of the source with its number while those of the other
// sources are deleted. Each placement it reads is compared at the
// revision this node knows, so that a pin changed meanwhile fails it.
func (l *loop) groupOps(s *fleetview.Shape, g int) groupTxn {
	lay, id := l.n.layout, s.Resize.ID
	t := groupTxn{
		cmps: []clientv3.Cmp{
			clientv3.Compare(clientv3.ModRevision(lay.Spec()), "=", s.SpecRev),
			clientv3.Compare(clientv3.CreateRevision(lay.ResizeMoving(id, g)), ">", 0),
			clientv3.Compare(clientv3.CreateRevision(lay.ResizeDone(id, g)), "=", 0),
		},
		then: []clientv3.Op{
			clientv3.OpPut(lay.ResizeDone(id, g), ""),
			clientv3.OpDelete(lay.ResizeMoving(id, g)),
		},
	}
	srcs, tgts := s.Sources(g), s.Targets(g)
	for _, p := range srcs {
		t.cmps = append(t.cmps, clientv3.Compare(clientv3.CreateRevision(lay.Claim(p)), "=", 0))
	}
	place := func(p int) (fleetview.Placement, bool) {
		pl, ok := l.fleet.Placements[p]
		t.cmps = append(t.cmps, clientv3.Compare(clientv3.ModRevision(lay.Placement(p)), "=", pl.ModRev))
		return pl, ok
	}
	if len(srcs) == 1 { // a split
		parent, ok := place(srcs[0])
		for _, c := range tgts {
			if c == srcs[0] {
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
	for _, p := range srcs { // a merge into tgts[0] == g
		if p == tgts[0] {
			continue
		}
		if _, had := place(p); had {
			t.then = append(t.then, clientv3.OpDelete(lay.Placement(p)))
		}
	}
	return t
}

// groupDone is the result of a group's done transaction.
type groupDone struct {
	shape *fleetview.Shape
	g     int
	ok    bool
	rev   int64
	err   error
}

func (m groupDone) deliver(l *loop) { l.groupMoved(m) }

// groupMoved handles the result of a done transaction: a group this node
// marked done is counted and logged; a failed comparison (another node
// marked it first, a source claimed, a placement changed) needs nothing:
// the watch brings the change, and the next reconciliation tries again
// if the group is still to move.
func (l *loop) groupMoved(m groupDone) {
	delete(l.groupsInFlight, m.g)
	l.dirty = true
	rs := m.shape.Resize
	switch {
	case m.err != nil:
		l.n.log.Warn("resize: mark group done", "resize", rs.ID, "group", m.g, "error", m.err)
	case m.ok:
		d := time.Duration(-1)
		if at, ok := l.movingSeen[m.g]; ok {
			d = l.n.clock.Since(at)
		}
		l.n.report.groupMoved(d)
		l.n.log.Info("resize: group done", "resize", rs.ID, "group", m.g, "from", rs.From, "to", rs.To,
			"sources", partitionRanges(m.shape.Sources(m.g)), "targets", partitionRanges(m.shape.Targets(m.g)), "revision", m.rev)
	}
}
