package fleetview

import (
	"maps"

	"github.com/cespare/xxhash/v2"

	"github.com/tenure-go/tenure/internal/keys"
)

// Shape is how the fleet partitions its keys at one revision: the spec's
// partition count and, during a resize of it, the resize with its moving
// and done groups. It is immutable once built; readers share it.
//
// During a resize from F to T partitions (one a power-of-two multiple of
// the other), let small = min(F, T). Group s in [0, small) has the source
// partitions s + i*small (i < F/small) and the target partitions
// s + i*small (i < T/small). A key with hash h is in group h mod small,
// and in partition h mod T if its group is done, else h mod F (Of). A
// partition is active (claimed and served) if it is a target of a done
// group or a source of one that is not done; partition numbers shared by a
// source and a target are told apart by the group's state, and their
// tenures by their epochs, which are etcd revisions.
type Shape struct {
	// Partitions is the spec's count: F during a resize.
	Partitions int
	// SpecRev is the ModRevision of the spec key as this shape knows it
	// (0: no spec). Claims compare it, so that a node that has not seen
	// the spec's last change cannot claim.
	SpecRev int64
	// Resize is the resize in progress, nil if none.
	Resize *keys.Resize
	// Done holds, by group, the CreateRevision of its done key; Moving
	// the groups whose moving keys stand; Back, by group, the
	// CreateRevision of its back key: the group moved back to the source
	// count while the resize aborts (its done key was deleted then).
	Done   map[int]int64
	Moving map[int]bool
	Back   map[int]int64
	// Fenced holds the groups whose fenced keys stand: a holder of one of
	// the group's active partitions retired the partitions it replaced
	// (Replaced) at every fencer before it served.
	Fenced map[int]bool

	done []bool // by group
}

// NewShape returns the shape of a fleet of p partitions and no resize.
func NewShape(p int, specRev int64) *Shape { return &Shape{Partitions: p, SpecRev: specRev} }

// with returns a copy of s with its derived index rebuilt after change
// edits the copy.
func (s *Shape) with(change func(c *Shape)) *Shape {
	c := &Shape{Partitions: s.Partitions, SpecRev: s.SpecRev, Resize: s.Resize, Done: maps.Clone(s.Done), Moving: maps.Clone(s.Moving),
		Back: maps.Clone(s.Back), Fenced: maps.Clone(s.Fenced)}
	change(c)
	c.index()
	return c
}

// index builds the done index of s.
func (s *Shape) index() {
	if s.Resize == nil {
		s.done, s.Done, s.Moving, s.Back, s.Fenced = nil, nil, nil, nil, nil
		return
	}
	if s.Back == nil {
		s.Back = map[int]int64{}
	}
	if s.Fenced == nil {
		s.Fenced = map[int]bool{}
	}
	if s.Done == nil {
		s.Done = map[int]int64{}
	}
	if s.Moving == nil {
		s.Moving = map[int]bool{}
	}
	s.done = make([]bool, s.Resize.Small())
	for g := range s.Done {
		if g < len(s.done) {
			s.done[g] = true
		}
	}
}

// Max returns the number of partition numbers in use: max(F, T) during a
// resize, else the partition count.
func (s *Shape) Max() int {
	if s.Resize != nil {
		return max(s.Resize.From, s.Resize.To)
	}
	return s.Partitions
}

// Of returns the partition of key by the shape's rule. It does not
// allocate.
func (s *Shape) Of(key string) int { return s.OfHash(xxhash.Sum64String(key)) }

// OfHash returns the partition of a key with hash h.
func (s *Shape) OfHash(h uint64) int {
	if s.Resize == nil {
		if s.Partitions <= 0 {
			return -1
		}
		return int(h % uint64(s.Partitions))
	}
	if s.done[h%uint64(len(s.done))] {
		return int(h % uint64(s.Resize.To))
	}
	return int(h % uint64(s.Resize.From))
}

// Group returns p's group during a resize (p mod small); -1 without one.
func (s *Shape) Group(p int) int {
	if s.Resize == nil || p < 0 {
		return -1
	}
	return p % s.Resize.Small()
}

// IsDone reports whether group g is done.
func (s *Shape) IsDone(g int) bool { return g >= 0 && g < len(s.done) && s.done[g] }

// Active reports whether partition p is claimed and served now: p < P
// without a resize; during one, a target of a done group or a source of a
// group that is not done.
func (s *Shape) Active(p int) bool {
	if p < 0 {
		return false
	}
	if s.Resize == nil {
		return p < s.Partitions
	}
	if s.done[p%len(s.done)] {
		return p < s.Resize.To
	}
	return p < s.Resize.From
}

// Target reports whether active partition p counts by the target
// partition count (its group is done).
func (s *Shape) Target(p int) bool { return s.Resize != nil && s.IsDone(s.Group(p)) }

// Count returns the partition count active partition p belongs to: the
// target count for a done group, else the spec's.
func (s *Shape) Count(p int) int {
	if s.Target(p) {
		return s.Resize.To
	}
	return s.Partitions
}

// Sources returns the source partitions of group g.
func (s *Shape) Sources(g int) []int { return members(g, s.Resize.Small(), s.Resize.From) }

// Targets returns the target partitions of group g.
func (s *Shape) Targets(g int) []int { return members(g, s.Resize.Small(), s.Resize.To) }

// Aborting reports whether the resize in progress returns to its
// starting count.
func (s *Shape) Aborting() bool { return s.Resize != nil && s.Resize.Aborting }

// Replaced returns the partitions that active partition p replaced in its
// group's last change, and the revision of that change: for a target of
// a done group, its sources at the done key's revision; for a source of a
// group moved back, its targets at the back key's revision; else none.
// Every tenure of a replaced partition has an epoch below that revision
// (the change required their claims gone, and no claim of theirs can
// follow it), and every tenure of p one above it.
func (s *Shape) Replaced(p int) ([]int, int64) {
	g := s.Group(p)
	switch {
	case g < 0 || !s.Active(p):
		return nil, 0
	case s.IsDone(g):
		return s.Sources(g), s.Done[g]
	case s.Back[g] != 0:
		return s.Targets(g), s.Back[g]
	}
	return nil, 0
}

func members(g, small, n int) []int {
	out := make([]int, 0, n/small)
	for p := g; p < n; p += small {
		out = append(out, p)
	}
	return out
}

// Leaving reports whether active partition p's group is asked to move
// (its moving key stands): its holder hands it off and nobody claims it
// again, so that the group can change phase.
func (s *Shape) Leaving(p int) bool {
	return s.Resize != nil && s.Moving[s.Group(p)] && s.Active(p)
}

// Settled reports whether the resize can end: moving forward, every group
// is done; aborting, none is; and every group that changed phase is
// fenced (its replaced partitions retired at every fencer), so that no
// holder of a partition after the end needs to retire any.
func (s *Shape) Settled() bool {
	if s.Resize == nil {
		return false
	}
	if s.Aborting() {
		if len(s.Done) > 0 {
			return false
		}
		for g := range s.Back {
			if !s.Fenced[g] {
				return false
			}
		}
		return true
	}
	if len(s.Done) != s.Resize.Small() {
		return false
	}
	for g := range s.Done {
		if !s.Fenced[g] {
			return false
		}
	}
	return true
}

// applyResize folds a resize key's event into the shape; it reports
// whether the rings must be recomputed.
func (f *State) applyResize(e Event) bool {
	old := f.Shape
	rk, rs := e.Resize.Key, e.Resize.Record
	switch {
	case rk.Record && e.Put:
		f.setShape(old.with(func(c *Shape) {
			if c.Resize == nil || c.Resize.ID != rs.ID {
				c.Done, c.Moving, c.Back, c.Fenced = nil, nil, nil, nil
			}
			c.Resize, c.Partitions, c.SpecRev = rs, rs.From, e.Rev
		}))
		return true
	case rk.Record:
		if old.Resize == nil || old.Resize.ID != rk.ID {
			return false
		}
		if rs == nil {
			rs = old.Resize
		}
		to := rs.To
		if rs.Aborting {
			to = rs.From
		}
		f.setShape(old.with(func(c *Shape) { c.Resize, c.Partitions, c.SpecRev = nil, to, e.Rev }))
		return true
	case old.Resize == nil || old.Resize.ID != rk.ID:
		return false
	case rk.Moving:
		if old.Moving[rk.Group] == e.Put {
			return false
		}
		f.Shape = old.with(func(c *Shape) {
			if e.Put {
				c.Moving[rk.Group] = true
			} else {
				delete(c.Moving, rk.Group)
			}
		})
		return false
	case rk.Fenced:
		if old.Fenced[rk.Group] == e.Put {
			return false
		}
		f.Shape = old.with(func(c *Shape) {
			if e.Put {
				c.Fenced[rk.Group] = true
			} else {
				delete(c.Fenced, rk.Group)
			}
		})
		return false
	case rk.Back:
		if _, ok := old.Back[rk.Group]; ok == e.Put {
			return false
		}
		f.Shape = old.with(func(c *Shape) {
			if e.Put {
				c.Back[rk.Group] = e.Rev
			} else {
				delete(c.Back, rk.Group)
			}
		})
		return false
	default:
		if _, ok := old.Done[rk.Group]; ok == e.Put {
			return false
		}
		f.Shape = old.with(func(c *Shape) {
			if e.Put {
				c.Done[rk.Group] = e.Rev
			} else {
				delete(c.Done, rk.Group)
			}
		})
		return false
	}
}

// WithResize returns s with the resize rs in progress (s itself if it is
// s's): the shape a resize about to start has.
func (s *Shape) WithResize(rs *keys.Resize) *Shape {
	if s.Resize == rs {
		return s
	}
	return s.with(func(c *Shape) { c.Resize, c.Done, c.Moving, c.Back, c.Fenced = rs, nil, nil, nil, nil })
}
