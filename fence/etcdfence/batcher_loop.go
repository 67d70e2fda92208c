package etcdfence

import (
	"context"
	"slices"
	"sync/atomic"
	"time"
)

// This file holds a Batcher's committers: how one gathers a batch (gather,
// linger), takes it from the queue (take) and commits it (commit).

// group is the writes of a batch to one key: one write, or consecutive
// Puts under one token coalesced into the last one's.
type group struct {
	e          entry    // what is written: the last write of the group
	head, tail *request // linked by request.next
}

// committer takes batches from the queue and commits them while a commit
// slot is free, until Close. It keeps its slot from one batch to the next
// as long as writes keep coming: writers answered by a commit then join
// the next batch instead of committing alone.
func (b *Batcher) committer() {
	defer b.committers.Done()
	var (
		groups  []group
		entries []entry
		results []Result
		linger  *time.Timer
		back    int           // writes the last batch answered
		took    time.Duration // how long the last commit took
		h       = &handoff{back: make(chan struct{}, 1)}
		r       = returns{share: returnsOne}
	)
	b.mu.Lock()
	defer b.mu.Unlock()
	for {
		for !b.closed && !b.ready() {
			b.parked++
			b.mu.Unlock()
			select {
			case <-b.wake:
			case <-b.ctx.Done():
			}
			b.mu.Lock()
			b.parked--
		}
		if b.closed {
			return
		}
		b.inFlight++ // the slot is this committer's from here
		for !b.closed {
			b.mu.Unlock()
			if b.cfg.Linger > 0 {
				linger = b.linger(linger)
			} else {
				linger = b.gather(h, &r, back, took/gatherShare, linger)
			}
			b.mu.Lock()
			groups = b.take(groups[:0])
			if len(groups) == 0 {
				break
			}
			if b.ready() && b.parked > 0 {
				b.signal()
			}
			b.mu.Unlock()

			start := time.Now()
			entries, results, back = b.commit(h, groups, entries, results)
			took = time.Since(start)

			b.mu.Lock()
			if b.busy != nil {
				for _, g := range groups {
					b.markBusy(g.e.full, -1)
				}
				b.stalled = false
			}
			clear(groups) // drop the requests
		}
		b.inFlight--
		b.stalled = len(b.queue) > 0 // what is left waits for keys in flight
	}
}

// gatherShare is the share of the last commit's duration that a committer
// may spend gathering the next batch.
const gatherShare = 8

// gather lets writers queue before a batch closes, holding a commit slot.
// back is the number of writers the last batch answered (through h): they
// may be about to submit again. gather waits, parked, until the share of
// them that r expects back is queued (or MaxBatch), or until budget,
// 1/gatherShare of the last commit, has passed: writers just answered by a
// commit join this batch instead of the next one, and a batch whose
// writers went elsewhere is delayed by at most that share of a commit. It
// then tells r how many came back.
//
// It first waits until every writer answered has run again (h.wait), then
// until enough are queued (waitQueued). Waiting parked, rather than
// polling, frees the committer's processor for the writers it waits for.
func (b *Batcher) gather(h *handoff, r *returns, back int, budget time.Duration, t *time.Timer) *time.Timer {
	b.mu.Lock()
	n := len(b.queue)
	b.mu.Unlock()
	expect := r.expect(back)
	want := min(n+expect, b.cfg.MaxBatch)
	if n >= want || budget <= 0 {
		return t
	}
	h.wait(b.ctx)
	t = b.waitQueued(t, want, budget)
	b.mu.Lock()
	came := len(b.queue) - n
	b.mu.Unlock()
	if want == n+expect { // a gather cut short by MaxBatch shows nothing
		r.observe(back, expect, came)
	}
	return t
}

// returns is a committer's estimate of the share of the writers a batch
// answered that submit their next write to this Batcher within a gather:
// all of them when one Batcher serves a fixed set of writers, a fraction
// when writers spread their writes over several Batchers (a router's
// nodes), none when every write comes from a new caller. gather waits for
// that share only, so that a committer whose writers went elsewhere does
// not wait its whole budget for each batch.
type returns struct {
	share int // in units of returnsOne
}

// returnsOne is a share of 1 (every writer answered comes back).
const returnsOne = 1 << 10

// expect is the number of the back writers answered to wait for: the
// expected share, rounded up, and at least one, so that a share grows
// again when writers come back.
func (r *returns) expect(back int) int {
	if back <= 0 {
		return 0
	}
	return max(1, (back*r.share+returnsOne-1)/returnsOne)
}

// observe records that came writes were queued during a gather that
// waited for expect of back writers answered. A gather that got what it
// waited for counts one writer more than came, so that the share, which
// such a gather cannot show to be too low, rises until gathers wait for
// writers that do not come.
func (r *returns) observe(back, expect, came int) {
	if back <= 0 {
		return
	}
	if came >= expect {
		came++
	}
	sample := min(returnsOne, came*returnsOne/back)
	r.share += (sample - r.share) / 4
}

// handoff is a committer's count of the writers it answered that have not
// run since (out), with a signal for the moment the last of them does.
type handoff struct {
	out  atomic.Int32
	back chan struct{} // cap 1
}

// resumed records that a writer answered through h runs again.
func (h *handoff) resumed() {
	if h.out.Add(-1) == 0 {
		select {
		case h.back <- struct{}{}:
		default:
		}
	}
}

// wait returns once every writer answered through h has run again, or ctx
// is done. It is bounded: those writers are runnable.
func (h *handoff) wait(ctx context.Context) {
	for h.out.Load() > 0 {
		select {
		case <-h.back:
		case <-ctx.Done():
			return
		}
	}
}

// linger waits, holding a commit slot, until MaxBatch writes are queued,
// Linger has passed or the Batcher closes. It returns its timer for reuse.
func (b *Batcher) linger(t *time.Timer) *time.Timer {
	return b.waitQueued(t, b.cfg.MaxBatch, b.cfg.Linger)
}

// waitQueued waits, parked, until n writes are queued (do wakes it through
// b.waitFor), d has passed or the Batcher closes. It reuses the timer t,
// nil at first, and returns it.
func (b *Batcher) waitQueued(t *time.Timer, n int, d time.Duration) *time.Timer {
	b.mu.Lock()
	if len(b.queue) >= n {
		b.mu.Unlock()
		return t
	}
	b.waitFor = n
	b.mu.Unlock()
	if t == nil {
		t = time.NewTimer(d)
	} else {
		t.Reset(d)
	}
	select {
	case <-t.C:
	case <-b.wake:
		t.Stop()
	case <-b.ctx.Done():
		t.Stop()
	}
	b.mu.Lock()
	b.waitFor = 0
	b.mu.Unlock()
	return t
}

// take removes from the queue, in order, the writes of the next batch and
// returns them appended to groups, one group per key. A write stays in the
// queue if an earlier write to its key stays or is in flight, or if its
// key already has a group it cannot be coalesced into; then every later
// write to that key stays too, so that writes to one key keep their order.
// Writes whose caller has gone are answered with their context's error.
// b.mu is held.
func (b *Batcher) take(groups []group) []group {
	taken := 0
	rest := b.queue[:0]
	for i, r := range b.queue {
		if taken == b.cfg.MaxBatch {
			rest = append(rest, b.queue[i:]...)
			break
		}
		if err := r.ctx.Err(); err != nil {
			r.answer(Result{Err: err}, nil)
			continue
		}
		gi, seen := b.keys[r.e.full]
		switch {
		case !seen && b.busy[r.e.full] == 0:
			b.keys[r.e.full] = len(groups)
			groups = append(groups, group{e: r.e, head: r, tail: r})
			b.markBusy(r.e.full, 1)
			taken++
		case seen && gi >= 0 && b.coalesces(&groups[gi].e, &r.e):
			g := &groups[gi]
			g.tail.next, g.tail, g.e = r, r, r.e
			b.coalesced.Add(1)
			taken++
		default:
			b.keys[r.e.full] = -1
			rest = append(rest, r)
		}
	}
	clear(b.keys)
	clear(b.queue[len(rest):])
	b.queue = rest
	return groups
}

// coalesces reports whether next may be coalesced into a group whose last
// write is last: both are Puts under the same token, so that writing only
// next gives each the Result it would get alone.
func (b *Batcher) coalesces(last, next *entry) bool {
	return !b.cfg.NoCoalesce && last.Kind == KindPut && next.Kind == KindPut && last.Token == next.Token
}

// commit commits groups, whose writes hold a commit slot, and answers every
// request of them. entries and results are scratch space, returned for
// reuse, with the number of requests answered.
func (b *Batcher) commit(h *handoff, groups []group, entries []entry, results []Result) ([]entry, []Result, int) {
	entries = entries[:0]
	for i := range groups {
		entries = append(entries, groups[i].e)
		entries[i].idx = i
	}
	results = slices.Grow(results[:0], len(groups))[:len(groups)]
	clear(results)
	ctx, cancel := context.WithTimeout(b.ctx, b.cfg.CommitTimeout)
	_ = b.s.commitEntries(ctx, entries, results, true) // failures are in results
	cancel()
	n := 0
	for i := range groups {
		for r := groups[i].head; r != nil; r = r.next {
			n++
		}
	}
	// Counted before the answers, so that a caller answered sees its
	// write in Stats.
	b.commits.Add(1)
	b.writes.Add(uint64(n))
	for i := range groups {
		for r := groups[i].head; r != nil; {
			next := r.next
			r.next = nil
			r.answer(results[i], h)
			r = next
		}
	}
	clear(entries) // drop the values
	return entries, results, n
}
