package ownership

import (
	"maps"
	"slices"
	"strings"
	"time"
)

// The lines of a claim batch: the partitions one claim transaction
// acquired are logged together, once every one of them serves or has
// ended, in one "acquired" line, and those of them that this node took
// over after their holder lost its session in one "took over" line per
// cause. Fencers answer each partition in its own time, so that the
// tenures of a batch are acquired one by one; the lines wait for the
// last.

// logBatches logs the claim batches none of whose tenures is still on its
// way to acquisition: fencing, waiting to fence again, or acquired with its
// acquisition not counted yet (queued).
func (o *report) logBatches(queued []acquisition) {
	if len(o.batches) == 0 {
		return
	}
	pending := map[int64]bool{}
	for _, a := range queued {
		pending[a.t.token.Epoch] = true
	}
	for p := range o.n.slots.len() {
		if r := o.n.slots.at(p).load(); r.t != nil && (r.phase == phaseFencing || r.phase == phaseFenceWait) {
			pending[r.t.token.Epoch] = true
		}
	}
	for _, epoch := range slices.Sorted(maps.Keys(o.batches)) {
		if !pending[epoch] {
			o.logBatch(o.batches[epoch])
			delete(o.batches, epoch)
		}
	}
}

// logBatch logs claim batch b: one Info line with the count, the
// partitions as ranges, the epoch, the longest unowned time and how many
// were prepared; then, for each cause of failover among them, one Warn
// line with the partitions taken over, their previous holders and how
// long they went unserved (logTakeover).
func (o *report) logBatch(b *claimBatch) {
	ps, epochs := make([]int, len(b.acq)), make([]int64, len(b.acq))
	var longest time.Duration
	prepared := 0
	for i, a := range b.acq {
		ps[i], epochs[i] = a.t.p, a.t.token.Epoch
		longest = max(longest, a.unowned)
		if !a.t.prepared.IsZero() {
			prepared++
		}
	}
	o.n.log.Info("acquired "+partitionCount(len(ps)), "count", len(ps), "partitions", partitionRanges(ps),
		"epochs", epochRange(epochs), "lease", b.lease, "longest_unowned_for", longest, "prepared", prepared)
	for _, c := range failoverCauses {
		o.logTakeover(b, c)
	}
}

// logTakeover logs the partitions of b taken over after a failover of
// cause c, if any: their previous holders, the longest time from a
// holder's last renewal to acquisition (a lower bound, where known) and the
// longest takeover (from the claim's deletion to acquisition).
func (o *report) logTakeover(b *claimBatch, c failoverCause) {
	var (
		ps                     []int
		epochs                 []int64
		holders                = map[string]bool{}
		sinceRenewal, takeover time.Duration
		bounded                = true
	)
	for _, a := range b.acq {
		f := a.failover
		if f.cause != c {
			continue
		}
		ps, epochs = append(ps, a.t.p), append(epochs, a.t.token.Epoch)
		holders[f.holder] = true
		takeover = max(takeover, f.takeover)
		sinceRenewal = max(sinceRenewal, f.sinceRenewal)
		bounded = bounded && f.sinceRenewal > 0
	}
	if len(ps) == 0 {
		return
	}
	kv := []any{"cause", c.String(), "holders", strings.Join(slices.Sorted(maps.Keys(holders)), ","), "count", len(ps),
		"partitions", partitionRanges(ps), "epochs", epochRange(epochs), "lease", b.lease}
	if bounded {
		kv = append(kv, "longest_since_renewal", sinceRenewal)
	}
	kv = append(kv, "longest_takeover", takeover)
	o.n.log.Warn("took over "+partitionCount(len(ps))+" whose holder's session was lost", kv...)
}
