package scale

import (
	"context"
	"fmt"
	"runtime/metrics"
	"time"

	"github.com/tenure-go/tenure/ownership/ring"
)

// settled is what one wait for a stable ring took.
type settled struct {
	virtual time.Duration // virtual time the driver advanced
	wall    time.Duration
	steps   int // clock advances
}

// settle waits until the ring of the live members is stable (see the
// package documentation) and every join or close the driver started has
// returned, advancing the virtual clock by Step whenever the fleet is
// quiescent and not yet stable.
func (f *fleet) settle(ctx context.Context) (settled, error) {
	want, err := f.expected()
	if err != nil {
		return settled{}, err
	}
	start, wallStart := f.fc.Now(), time.Now()
	q := newQuiescence(f)
	steps := 0
	for {
		if err := q.wait(ctx); err != nil {
			return settled{}, err
		}
		busy, err := f.pending()
		if err != nil {
			return settled{}, err
		}
		why := ""
		if busy {
			why = "a join or close is still running"
		} else {
			why = f.unstable(want)
		}
		if why == "" {
			return settled{virtual: f.fc.Since(start), wall: time.Since(wallStart), steps: steps}, nil
		}
		if time.Since(wallStart) > f.cfg.WaitTimeout {
			return settled{}, fmt.Errorf("%w after %v (%v virtual): %s", ErrUnstable, time.Since(wallStart).Round(time.Millisecond), f.fc.Since(start), why)
		}
		f.fc.Advance(f.cfg.Step)
		steps++
	}
}

// unstable returns why the fleet is not stable on ring want, or "".
func (f *fleet) unstable(want *ring.Ring) string {
	version := want.Version()
	owners := make([]string, want.Partitions()) // "": nobody
	for p := range owners {
		owners[p], _ = want.Owner(p)
	}
	for _, id := range f.ids {
		m := f.members[id]
		switch {
		case m.live && m.node == nil:
			return id + " has not joined"
		case m.live && m.node.Ring().Version() != version:
			return fmt.Sprintf("%s sees %d members, not the %d live", id, len(m.node.Ring().Members()), len(want.Members()))
		case m.crashed && m.node != nil && len(m.node.Owned()) > 0:
			return fmt.Sprintf("crashed %s still serves %d partitions", id, len(m.node.Owned()))
		}
	}
	f.mu.Lock()
	for p, o := range owners {
		if f.serving[p] != o {
			got := f.serving[p]
			f.mu.Unlock()
			return fmt.Sprintf("partition %d: callbacks say %q serves it, the ring says %q", p, got, o)
		}
	}
	f.mu.Unlock()
	for _, id := range f.ids {
		m := f.members[id]
		if !m.live {
			continue
		}
		for p, o := range owners {
			r := m.node.LookupPartition(p)
			if r.Owner != o || r.Epoch == 0 || r.Local != (o == id) {
				return fmt.Sprintf("%s sees partition %d owned by %q at epoch %d (local %v); the ring says %q", id, p, r.Owner, r.Epoch, r.Local, o)
			}
		}
	}
	return ""
}

// quiescence tells when the fleet has stopped making progress: no
// goroutine runnable or running but the driver, and no etcd request, watch
// response, callback or published snapshot for Config.Quiet of wall time.
type quiescence struct {
	f       *fleet
	samples []metrics.Sample
	last    signature
}

type signature struct {
	requests, watch, callbacks, snapshots int64
}

func newQuiescence(f *fleet) *quiescence {
	return &quiescence{f: f, samples: []metrics.Sample{
		{Name: "/sched/goroutines/runnable:goroutines"},
		{Name: "/sched/goroutines/running:goroutines"},
	}}
}

// poll reads the activity counters. snapshots counts the nodes whose
// routing snapshot changed since the last poll.
func (q *quiescence) poll() (signature, bool) {
	f := q.f
	st := f.srv.Stats()
	s := signature{
		requests:  st.Requests,
		watch:     st.WatchResponses,
		callbacks: f.acquired.Load() + f.released.Load(),
		snapshots: q.last.snapshots,
	}
	for _, id := range f.ids {
		m := f.members[id]
		if m.node == nil {
			continue
		}
		if ch := m.node.Changed(); ch != m.seen {
			m.seen = ch
			s.snapshots++
		}
	}
	metrics.Read(q.samples)
	return s, count(q.samples[0]) == 0 && count(q.samples[1]) <= 1 // the driver runs
}

// count is a goroutine count from runtime/metrics (0 if unsupported).
func count(s metrics.Sample) uint64 {
	if s.Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s.Value.Uint64()
}

// wait returns once the fleet has been quiescent for Config.Quiet.
func (q *quiescence) wait(ctx context.Context) error {
	tick := max(q.f.cfg.Quiet/5, 100*time.Microsecond)
	var quietSince time.Time
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		s, idle := q.poll()
		now := time.Now()
		if s != q.last || !idle {
			q.last = s
			quietSince = time.Time{}
		} else if quietSince.IsZero() {
			quietSince = now
		} else if now.Sub(quietSince) >= q.f.cfg.Quiet {
			return nil
		}
		sleepReal(tick)
	}
}

// sleepReal sleeps d of wall time.
func sleepReal(d time.Duration) { time.Sleep(d) }
