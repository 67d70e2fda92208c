package router

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tenure-go/tenure/internal/clock"

	"github.com/hashicorp/go-hclog"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership"
)

// EtcdClient is what a Client needs from etcd: reads and watches, no lease.
// *clientv3.Client satisfies it.
type EtcdClient interface {
	clientv3.KV
	clientv3.Watcher
}

// Route is where a Client sends the requests for one key.
type Route struct {
	// Partition is the key's partition.
	Partition int
	// Owner is the ID of the partition's owner: the holder of its claim, or,
	// while nobody holds a claim, the ring's choice. Empty if unknown.
	Owner string
	// Addr is the owner's advertised address, empty if unknown.
	Addr string
	// Epoch is the epoch of the owner's claim, 0 if the route is the ring's
	// choice of a next owner that has not claimed the partition yet.
	Epoch int64
}

// claim is the holder and epoch of one partition's claim; owner is empty
// when there is no claim.
type claim struct {
	owner string
	epoch int64
}

// view is an immutable snapshot of the fleet's members and claims, as of
// etcd revision rev.
type view struct {
	rev     int64
	members map[string]keys.Member
	claims  []claim
	ring    *ownership.Ring
}

// route resolves partition p. It takes no lock and does not allocate.
func (v *view) route(p int) Route {
	r := Route{Partition: p}
	if c := v.claims[p]; c.owner != "" {
		if m, ok := v.members[c.owner]; ok && m.Addr != "" {
			r.Owner, r.Addr, r.Epoch = c.owner, m.Addr, c.epoch
			return r
		}
	}
	if id, ok := v.ring.Owner(p); ok {
		r.Owner, r.Addr = id, v.members[id].Addr
	}
	return r
}

// watcher keeps a view of one cluster's members and claims up to date from
// an etcd watch. It is safe for concurrent use.
type watcher struct {
	etcd    EtcdClient
	layout  keys.Layout
	ringCfg ownership.RingConfig
	backoff Backoff
	log     hclog.Logger
	clock   clock.Clock

	cur      atomic.Pointer[view]
	mismatch atomic.Int64 // claims seen for partitions >= P
	resyncs  atomic.Int64
	mu       sync.Mutex
	changed  chan struct{} // closed and replaced on every published view
}

func newWatcher(etcd EtcdClient, layout keys.Layout, ringCfg ownership.RingConfig, log hclog.Logger, clock clock.Clock) *watcher {
	return &watcher{
		etcd:    etcd,
		layout:  layout,
		ringCfg: ringCfg,
		backoff: Backoff{Initial: 50 * time.Millisecond, Max: 2 * time.Second},
		log:     log,
		clock:   clock,
		changed: make(chan struct{}),
	}
}

// view returns the current view.
func (w *watcher) view() *view { return w.cur.Load() }

// changedCh returns a channel closed at the next published view.
func (w *watcher) changedCh() <-chan struct{} {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed
}

func (w *watcher) publish(v *view) {
	w.cur.Store(v)
	w.mu.Lock()
	close(w.changed)
	w.changed = make(chan struct{})
	w.mu.Unlock()
}

// load reads every member and claim at one revision.
func (w *watcher) load(ctx context.Context) (*view, error) {
	resp, err := w.etcd.Txn(ctx).Then(
		clientv3.OpGet(w.layout.Members(), clientv3.WithPrefix()),
		clientv3.OpGet(w.layout.Claims(), clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, fmt.Errorf("router: read members and claims: %w", err)
	}
	v := &view{
		rev:     resp.Header.Revision,
		members: make(map[string]keys.Member),
		claims:  make([]claim, w.ringCfg.Partitions),
	}
	for _, kv := range resp.Responses[0].GetResponseRange().GetKvs() {
		w.putMember(v.members, kv)
	}
	for _, kv := range resp.Responses[1].GetResponseRange().GetKvs() {
		w.putClaim(v.claims, kv)
	}
	v.ring = w.buildRing(v.members)
	return v, nil
}

// putMember records a member key-value in members.
//
// It follows the nodes' own rule (ownership), so that the Client computes
// the fleet's ring: a key whose ID is not a valid node ID is ignored, and a
// member whose value cannot be decoded is kept, with no address.
func (w *watcher) putMember(members map[string]keys.Member, kv *mvccpb.KeyValue) {
	id, ok := w.layout.MemberID(string(kv.Key))
	if !ok || ownership.ValidateNodeID(id) != nil {
		w.log.Warn("ignoring member key with an invalid node ID", "key", string(kv.Key))
		return
	}
	m, err := keys.DecodeMember(kv.Value)
	if err != nil {
		w.log.Warn("undecodable member value; using an empty address", "node", id, "error", err)
		m = keys.Member{}
	}
	m.ID = id // the key is authoritative
	members[id] = m
}

// putClaim records a claim key-value in claims.
func (w *watcher) putClaim(claims []claim, kv *mvccpb.KeyValue) {
	p, ok := w.layout.ClaimPartition(string(kv.Key))
	if !ok {
		return
	}
	if p >= len(claims) {
		if w.mismatch.Add(1) == 1 {
			w.log.Error("claim for a partition beyond the configured count: Partitions does not match the fleet",
				"key", string(kv.Key), "partitions", len(claims))
		}
		return
	}
	claims[p] = claim{owner: string(kv.Value), epoch: kv.CreateRevision}
}

// buildRing computes the ring of the members (whose IDs putMember has
// validated).
func (w *watcher) buildRing(members map[string]keys.Member) *ownership.Ring {
	r, err := ownership.NewRing(slices.Collect(maps.Keys(members)), w.ringCfg)
	if err != nil {
		// Unreachable: the config and the IDs are validated.
		w.log.Error("cannot build ring", "error", err)
		return nil
	}
	return r
}

// run keeps the view current until ctx ends, starting from the view
// already published.
func (w *watcher) run(ctx context.Context) {
	for {
		err := w.watch(ctx, w.view().rev)
		if ctx.Err() != nil {
			return
		}
		w.log.Debug("watch ended; reading members and claims again", "error", err)
		for failures := 1; ; failures++ {
			if w.backoff.Wait(ctx, w.clock, failures) != nil {
				return
			}
			v, err := w.load(ctx)
			if err == nil {
				w.resyncs.Add(1)
				w.publish(v)
				break
			}
			if ctx.Err() != nil {
				return
			}
			w.log.Warn("cannot read members and claims", "error", err)
		}
	}
}

var errWatchClosed = errors.New("router: watch closed")

// watch applies member and claim events after revision rev until the watch
// fails or ctx ends.
func (w *watcher) watch(ctx context.Context, rev int64) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	mch := w.etcd.Watch(wctx, w.layout.Members(), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	cch := w.etcd.Watch(wctx, w.layout.Claims(), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	for {
		var (
			resp    clientv3.WatchResponse
			ok      bool
			members bool
		)
		select {
		case resp, ok = <-mch:
			members = true
		case resp, ok = <-cch:
		case <-ctx.Done():
			return ctx.Err()
		}
		if !ok {
			return errWatchClosed
		}
		if err := resp.Err(); err != nil {
			return err
		}
		if len(resp.Events) == 0 {
			continue
		}
		cur := w.view()
		next := &view{rev: max(cur.rev, resp.Header.Revision), members: cur.members, claims: cur.claims, ring: cur.ring}
		if members {
			next.members = maps.Clone(cur.members)
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypeDelete {
					if id, ok := w.layout.MemberID(string(ev.Kv.Key)); ok {
						delete(next.members, id)
					}
					continue
				}
				w.putMember(next.members, ev.Kv)
			}
			if !sameKeys(cur.members, next.members) {
				next.ring = w.buildRing(next.members)
			}
		} else {
			next.claims = slices.Clone(cur.claims)
			for _, ev := range resp.Events {
				if ev.Type == clientv3.EventTypeDelete {
					if p, ok := w.layout.ClaimPartition(string(ev.Kv.Key)); ok && p < len(next.claims) {
						next.claims[p] = claim{}
					}
					continue
				}
				w.putClaim(next.claims, ev.Kv)
			}
		}
		w.publish(next)
	}
}

func sameKeys(a, b map[string]keys.Member) bool {
	if len(a) != len(b) {
		return false
	}
	for k := range a {
		if _, ok := b[k]; !ok {
			return false
		}
	}
	return true
}
