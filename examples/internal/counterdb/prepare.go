package counterdb

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tenure-go/tenure/ownership"
)

// Warm handoff (ownership.Callbacks.OnPrepare): when a planned move makes
// this node the next owner of a partition, it loads the partition's
// counters from the database while the current owner still serves and
// writes them: a snapshot, with the highest seq it saw (every write of a
// partition's counters stamps them with a seq above every earlier write of
// that partition's keys, whoever the owner). Once this node has claimed the
// partition, its fencers have shut the previous owner out, and the load
// that follows reads only the rows whose seq is above the snapshot's: what
// changed since (catchUp), instead of the whole partition. A snapshot
// taken under the tenure that hands the partition over is a correct base
// to catch up from; one that is missing makes the load a full one, as
// without a prepare phase. A snapshot is used only by the tenure whose
// claim followed its preparation (Event.Prepared) and counts by the same
// partition count: across a resize of the count, a partition's keys
// change, and the owners of its keys in between (the children of a
// split, the sources of a merge) stamp seqs of their own, which a
// snapshot's highest seq does not bound.

// snapshot is a partition's counters as a preparation read them.
type snapshot struct {
	count  int // the partition count it was read by: a snapshot of p under another count has other keys
	values map[string]int64
	seq    int64 // the highest seq read
	taken  time.Time
}

// prepare is the node's OnPrepare: it stages a snapshot of partition p.
// The node calls it for every partition a move gives it at once (a
// process that starts takes about 1/N of every other's partitions); the
// snapshots are read one at a time per CPU pair (s.preparing), so that
// the reads leave the node's own work (its watch of the fleet, the
// requests it serves, its claims) its share of the CPU: a preparation is
// not urgent, since the holder serves until the successor is ready.
func (s *Store) prepare(e ownership.Event) error {
	select {
	case s.preparing <- struct{}{}:
		defer func() { <-s.preparing }()
	case <-e.Context.Done():
		return context.Cause(e.Context)
	}
	began := time.Now()
	values, seq, err := s.read(e.Context, e.Partition, e.Partitions, -1)
	if err != nil {
		return fmt.Errorf("prepare partition %d: %w", e.Partition, err)
	}
	s.metrics.loads.WithLabelValues("prepare").Inc()
	s.metrics.rowsLoaded.WithLabelValues("prepare").Add(float64(len(values)))
	snap := &snapshot{count: e.Partitions, values: values, seq: seq, taken: began}
	s.mu.Lock()
	s.staged[e.Partition] = snap
	s.mu.Unlock()
	// A move called off leaves nothing behind: its snapshot is dropped.
	context.AfterFunc(e.Context, func() {
		if errors.Is(context.Cause(e.Context), ownership.ErrMoveCalledOff) {
			s.mu.Lock()
			if s.staged[e.Partition] == snap {
				delete(s.staged, e.Partition)
			}
			s.mu.Unlock()
		}
	})
	s.log.Trace("prepared", "partition", e.Partition, "holder", e.Holder, "keys", len(values), "took", time.Since(began))
	return nil
}

// takeStaged removes the snapshot staged for p and returns it if it was
// read by count partitions, nil if there is none or it was read by
// another count: a resize changed the keys of partition p since (a
// partition a resize creates has no previous holder, so it is not
// prepared and loads in full).
func (s *Store) takeStaged(p, count int) *snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	snap := s.staged[p]
	delete(s.staged, p)
	if snap == nil || snap.count != count {
		return nil
	}
	return snap
}

// catchUp completes snap, a snapshot of partition p, with the rows written
// since it was taken.
func (s *Store) catchUp(ctx context.Context, p, count int, snap *snapshot) (map[string]int64, int64, error) {
	changed, seq, err := s.read(ctx, p, count, snap.seq)
	if err != nil {
		return nil, 0, err
	}
	s.metrics.loads.WithLabelValues("catchup").Inc()
	s.metrics.rowsLoaded.WithLabelValues("catchup").Add(float64(len(changed)))
	for k, v := range changed {
		snap.values[k] = v
	}
	return snap.values, max(seq, snap.seq), nil
}
