package ownership

import (
	"context"
	"errors"
	"maps"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
)

// A rewind of etcd's revisions (etcd restored from a snapshot) shows where
// a store keeps its floors outside etcd: the store refuses the epoch etcd
// just issued for a partition because its floor is higher, and the floor
// is higher than etcd's revision too. No claim of this etcd's history can
// have made that floor, so the node reports the refusal as a *RewindError
// (a stale refusal of a floor etcd has reached is a newer owner's, and
// stays one). The partition stays unadmitted, as after any refusal, and
// its fencers are advanced again with backoff until etcd's revisions pass
// the floor. The node counts every such refusal, logs one line when a
// rewind first holds partitions back (not one per partition, nor one per
// retry) and another when none is held back any more, and lists the
// partitions held back in its Status.

// explainRewinds replaces each error of errs (the results of advancing the
// fencers of ts) that is a stale refusal of its tenure's own epoch by a
// floor above etcd's revision with a *RewindError. It reads etcd's
// revision once, and only if some refusal's floor is above its epoch; if
// etcd cannot answer, the refusals stay as they are.
func (n *Node) explainRewinds(ctx context.Context, ts []*tenure, errs []error) {
	var rev int64
	for j, err := range errs {
		var se *fence.StaleError
		if err == nil || !errors.As(err, &se) || se.Presented != ts[j].token.Epoch || se.Current <= se.Presented {
			continue
		}
		if rev == 0 {
			resp, gerr := n.cli.Get(ctx, n.layout.Claim(ts[j].p), clientv3.WithCountOnly())
			if gerr != nil || resp.Header == nil {
				return
			}
			rev = resp.Header.Revision
		}
		if se.Current > rev {
			errs[j] = &RewindError{Partition: ts[j].p, Scope: se.Scope, Epoch: se.Presented, Floor: se.Current, Revision: rev, stale: err}
		}
	}
}

// rewindsFound reports the rewinds that one result of fencing found (the
// partitions of found stay unadmitted): it counts each and, if no
// partition was held back by a rewind before, logs them in one line.
func (o *report) rewindsFound(found []*RewindError) {
	if len(found) == 0 {
		return
	}
	start := len(o.rewinds) == 0
	for _, rw := range found {
		o.m.fencerFailed()
		o.m.rewound()
		o.rewinds[rw.Partition] = rw
	}
	o.publishRewinds()
	if !start {
		return
	}
	ps, epochs := make([]int, len(found)), make([]int64, len(found))
	var floor, rev int64
	for i, rw := range found {
		ps[i], epochs[i] = rw.Partition, rw.Epoch
		floor, rev = max(floor, rw.Floor), max(rev, rw.Revision)
	}
	o.n.log.Error("etcd revisions went backwards (restored from a snapshot?): stores hold floors above the epochs etcd issues; "+
		"the partitions stay unserved until etcd's revision passes their floors (restore with etcdutl's --bump-revision; see tenurectl rewind-check)",
		"count", len(ps), "partitions", partitionRanges(ps), "epochs", epochRange(epochs), "floor", floor, "revision", rev)
}

// rewindOver forgets the rewind that held partition p back, if any, once
// p's record has left fencing (it serves, or the tenure ended), and logs
// the end of the rewind when it was the last partition held back.
func (o *report) rewindOver(p int) {
	rw, ok := o.rewinds[p]
	if !ok {
		return
	}
	delete(o.rewinds, p)
	o.publishRewinds()
	if len(o.rewinds) == 0 {
		o.n.log.Info("rewind over: no partition waits for etcd's revision to pass a floor", "last_partition", p, "floor", rw.Floor)
	}
}

// publishRewinds publishes the rewinds for Status, by partition.
func (o *report) publishRewinds() {
	var list []RewindError
	for _, p := range slices.Sorted(maps.Keys(o.rewinds)) {
		list = append(list, *o.rewinds[p])
	}
	o.rewound.Store(&list)
}

// rewoundNow returns the partitions a rewind holds back, for Status.
func (o *report) rewoundNow() []RewindError {
	if l := o.rewound.Load(); l != nil {
		return *l
	}
	return nil
}
