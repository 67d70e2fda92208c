package simulation

import (
	"context"
	"fmt"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/clock"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/memetcd"
)

// agreeEvery is how often, in virtual time, the readers are compared.
const agreeEvery = 50 * time.Millisecond

// readers compares, every agreeEvery of virtual time, the owner every
// node names for each key of the workload with the one a fleet.Observer
// (on an etcd client of its own) names, whenever the node and the
// Observer are at one etcd revision: at a revision, every reader must
// name the same partition, owner and epoch for every key, across planned
// moves, resizes and migrations. A node names itself only for a claim it
// serves, and knows claims from its transactions' results (its own, or
// the one that refused it) before its watch brings them; those are the
// two differences allowed. A reader's revision is a consistent cut
// (fleetview's Reader follows the fleet's keys on one watch, in revision
// order), so every difference at one revision counts.
type readers struct {
	w     *world
	nodes []*ownership.Node
	cli   *memetcd.Client
	obs   *fleet.Observer
	stop  context.CancelFunc
	done  sync.WaitGroup

	mu        sync.Mutex
	revs      map[int64]bool // revisions compared
	compared  int            // comparisons of a node with the Observer
	disagreed []string       // the first disagreements, in words
	disagrees int            // keys a node and the Observer differed on, per comparison
}

func startReaders(ctx context.Context, w *world, nodes []*ownership.Node) (*readers, error) {
	r := &readers{w: w, nodes: nodes, cli: w.srv.NewClient(), revs: map[int64]bool{}}
	rc := ring.DefaultConfig()
	rc.Partitions = w.cfg.Partitions
	octx, cancel := clock.WithTimeout(ctx, w.fc, time.Minute)
	defer cancel()
	obs, err := fleet.Observe(octx, r.cli, fleet.ObserverConfig{Cluster: cluster, Ring: rc, Clock: w.fc})
	if err != nil {
		_ = r.cli.Close()
		return nil, err
	}
	r.obs = obs
	ctx, r.stop = context.WithCancel(ctx)
	r.done.Go(func() {
		for clock.Sleep(ctx, w.fc, agreeEvery) {
			for i, n := range r.nodes {
				if !w.nodes[i].crashed.Load() {
					r.compare(i, n)
				}
			}
		}
	})
	return r, nil
}

// compare compares node n with the Observer if both are at one revision.
func (r *readers) compare(i int, n *ownership.Node) {
	rev := n.Status().Revision
	if rev == 0 || r.obs.Revision() != rev {
		return
	}
	bad := map[string]string{}
	for k := range r.w.cfg.Keys {
		key := keyName(k)
		rn, ro := n.Lookup(key), r.obs.Lookup(key)
		switch {
		case ro.Owner == n.ID() && !rn.Local && rn.Partition == ro.Partition:
			continue // its own claim, not served: it routes to the next owner
		case rn.Epoch > rev && rn.Partition == ro.Partition:
			continue // a claim known from a transaction's result before its watch brings it
		}
		if rn.Partition != ro.Partition || rn.Epoch != ro.Epoch || (ro.Epoch != 0 && rn.Owner != ro.Owner) {
			st := n.Status()
			bad[key] = fmt.Sprintf("at revision %d (%v), %s: %s names p%d %s@%d (local %v; live %v, ready %v, serves %v), the Observer p%d %s@%d; etcd: %s",
				rev, r.w.now(), key, n.ID(), rn.Partition, rn.Owner, rn.Epoch, rn.Local, st.Live, st.Ready, st.Partitions, ro.Partition, ro.Owner, ro.Epoch,
				r.claimAt(ro.Partition, rev))
		}
	}
	// Both views must still be at rev, or the routes may come from
	// another one.
	if n.Status().Revision != rev || r.obs.Revision() != rev {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.compared++
	r.revs[rev] = true
	for k := range r.w.cfg.Keys {
		if msg, ok := bad[keyName(k)]; ok {
			r.disagrees++
			if len(r.disagreed) < 5 {
				r.disagreed = append(r.disagreed, msg)
			}
		}
	}
}

// claimAt says what etcd held at revision rev as partition p's claim.
func (r *readers) claimAt(p int, rev int64) string {
	ctx, cancel := clock.WithTimeout(context.Background(), r.w.fc, time.Second)
	defer cancel()
	resp, err := r.cli.Get(ctx, keys.New(cluster).Claim(p), clientv3.WithRev(rev))
	switch {
	case err != nil:
		return err.Error()
	case len(resp.Kvs) == 0:
		return fmt.Sprintf("no claim of p%d", p)
	}
	return fmt.Sprintf("claim of p%d %q created at %d", p, resp.Kvs[0].Value, resp.Kvs[0].CreateRevision)
}

// result returns the comparisons made, the revisions they covered, the
// disagreements and the first of them in words.
func (r *readers) result() (compared, revs, disagrees int, first []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.compared, len(r.revs), r.disagrees, r.disagreed
}

// close stops the comparisons.
func (r *readers) close() {
	r.stop()
	r.done.Wait()
	r.obs.Close()
	_ = r.cli.Close()
}
