package simulation

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/internal/clock"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/sim/check"
	"github.com/tenure-go/tenure/sim/memetcd"
)

const (
	cluster    = "sim"
	dataPrefix = "data/"
	// batchLinger is how long, in real time, a node's Batcher waits for
	// more writes before it commits: the simulated etcd answers at once, so
	// without it a write would almost never find company.
	batchLinger = 200 * time.Microsecond
)

// tenureEx runs the workload on ownership nodes: route to the owner, Hold,
// read and write through an etcdfence.Store under the partition's token.
// With an odd seed, each node's writes go through an etcdfence.Batcher, so
// that they share transactions across partitions (group commit, with one
// floor comparison per partition). Unfenced, the nodes have no
// Fencers and write with plain puts.
type tenureEx struct {
	w        *world
	fenced   bool
	admin    *memetcd.Client
	nodes    []*ownership.Node
	stores   []*etcdfence.Store
	batchers []*etcdfence.Batcher // with an odd seed
	fencePf  string
	placePf  string
	raised   atomic.Int64   // RaiseFloor faults whose Put landed
	prep     *preparers     // the nodes' OnPrepare (prepare.go)
	hand     *handovers     // the hand-overs of claims and KillSuccessor faults (handover.go)
	bal      *simBalancer   // with balancerOn(seed), the fenced strategy only (balancer.go)
	moves    atomic.Int64   // the balancer's placements committed
	outside  sync.WaitGroup // RaiseFloor faults in progress

	mu   sync.Mutex
	revs map[int64]time.Duration // revision -> when it was committed
}

// revTime is when revision rev was committed (now if unknown).
func (ex *tenureEx) revTime(rev int64) time.Duration {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	if d, ok := ex.revs[rev]; ok {
		return d
	}
	return ex.w.now()
}

func newTenure(ctx context.Context, w *world, fenced bool) (*tenureEx, error) {
	ex := &tenureEx{w: w, fenced: fenced, admin: w.srv.NewClient(), fencePf: keys.New(cluster).Fences(), placePf: keys.New(cluster).Placements(), revs: map[int64]time.Duration{}}
	warm := w.cfg.TTL / 2
	ex.prep = newPreparers(w.cfg.Seed, warm, w.fc)
	ex.observe()
	ex.hand = newHandovers(w, ex.admin)
	w.outsider = func(ctx context.Context, f Fault) { ex.outside.Go(func() { ex.raiseFloor(ctx, f) }) }
	for _, n := range w.nodes {
		store, err := etcdfence.New(n.cli, etcdfence.Config{Cluster: cluster, Prefix: dataPrefix})
		if err != nil {
			return nil, err
		}
		ex.stores = append(ex.stores, store)
		if w.cfg.Seed%2 == 1 {
			b, err := etcdfence.NewBatcher(store, etcdfence.BatcherConfig{Linger: batchLinger})
			if err != nil {
				return nil, err
			}
			ex.batchers = append(ex.batchers, b)
		}
		cfg := ownership.DefaultConfig()
		cfg.Cluster = cluster
		cfg.NodeID = n.id
		cfg.Ring.Partitions = w.cfg.Partitions
		cfg.Session.TTL = w.cfg.TTL
		cfg.Clock = n.clock
		cfg.DrainTimeout = time.Second
		cfg.WarmTimeout = warm
		if fenced {
			cfg.Fencers = []fence.Fencer{store}
		}
		if fenced && balancerOn(w.cfg.Seed) {
			cfg.LoadInterval, cfg.LoadWindow = simLoadInterval, simLoadWindow
		}
		sn := n
		cfg.Callbacks = ownership.Callbacks{
			OnAcquired: func(e ownership.Event) {
				t := e.Token
				// The tenure began when its claim was created (its epoch's
				// revision), however late the callback runs.
				w.rec.BeginTenure(t.Scope, t.Epoch, sn.id, ex.revTime(t.Epoch))
				ex.hand.served(sn.id, t.Scope, t.Epoch)
			},
			OnReleased: func(e ownership.Event) {
				t := e.Token
				w.rec.EndTenure(t.Scope, t.Epoch, sn.id, w.now())
				sn.maybeHang()
			},
			OnPrepare: ex.prep.onPrepare(sn.id),
		}
		jctx, cancel := clock.WithTimeout(ctx, w.fc, time.Minute)
		node, err := ownership.Join(jctx, n.cli, cfg)
		cancel()
		if err != nil {
			return nil, err
		}
		ex.nodes = append(ex.nodes, node)
	}
	if fenced && balancerOn(w.cfg.Seed) {
		b, err := startBalancer(ctx, w)
		if err != nil {
			return nil, err
		}
		ex.bal = b
	}
	return ex, nil
}

// observe logs etcd's commits into the recorder in the store's order: the
// data writes (each value names its write) and the fence floors.
func (ex *tenureEx) observe() {
	w := ex.w
	w.srv.OnCommit(func(at time.Time, evs []*mvccpb.Event) {
		d := at.Sub(w.start)
		ex.mu.Lock()
		ex.revs[evs[0].Kv.ModRevision] = d
		ex.mu.Unlock()
		for _, ev := range evs {
			if ev.Type != mvccpb.PUT {
				continue
			}
			k := string(ev.Kv.Key)
			switch {
			case strings.HasPrefix(k, dataPrefix):
				if id := decodeCounter(string(ev.Kv.Value)).Write; id != 0 {
					w.rec.Applied(id, d)
				}
			case strings.HasPrefix(k, ex.placePf):
				countMove(&ex.moves, k, ev.Kv.Value)
			case strings.HasPrefix(k, ex.fencePf):
				if e, err := strconv.ParseInt(strings.TrimLeft(string(ev.Kv.Value), "0"), 10, 64); err == nil {
					w.rec.RaiseFloor(strings.TrimPrefix(k, ex.fencePf), e, d)
				}
			}
		}
	})
}

// requestTimeout bounds one etcd request of the workload.
func (ex *tenureEx) requestTimeout() time.Duration { return ex.w.cfg.TTL / 2 }

// owner finds key's owner as a random live node sees it, and admits the
// work there.
func (ex *tenureEx) owner(c *client, key string) (*simNode, ownership.Held, bool) {
	entry := ex.w.liveNode(c.rng)
	if entry == nil {
		return nil, ownership.Held{}, false
	}
	r := ex.nodes[entry.idx].Lookup(key)
	sn := ex.w.nodeByID(r.Owner)
	if sn == nil || sn.crashed.Load() {
		return nil, ownership.Held{}, false
	}
	held, err := ex.nodes[sn.idx].Hold(key)
	if err != nil {
		return nil, ownership.Held{}, false
	}
	return sn, held, true
}

func (ex *tenureEx) read(sn *simNode, t fence.Token, key string) (counter, error) {
	ctx, cancel := clock.WithTimeout(context.Background(), ex.w.fc, ex.requestTimeout())
	defer cancel()
	if ex.fenced {
		it, err := ex.stores[sn.idx].Get(ctx, t, key)
		if err != nil {
			return counter{}, err
		}
		return decodeCounter(string(it.Value)), nil
	}
	resp, err := sn.cli.Get(ctx, dataPrefix+key)
	if err != nil {
		return counter{}, err
	}
	if len(resp.Kvs) == 0 {
		return counter{}, nil
	}
	return decodeCounter(string(resp.Kvs[0].Value)), nil
}

func (ex *tenureEx) incr(ctx context.Context, c *client, key, idem string) (attempt, int64, bool) {
	sn, held, ok := ex.owner(c, key)
	if !ok {
		return retry, 0, false
	}
	defer held.Release()
	unlock, err := sn.lockKey(held.Context, key)
	if err != nil {
		return retry, 0, false
	}
	defer unlock()
	cur, err := ex.read(sn, held.Token, key)
	if err != nil {
		return retry, 0, false
	}
	if cur.has(idem) {
		return done, 0, false
	}
	// The check is done; a stall here is the classic one. The process
	// does not look at its tenure's context again before it writes.
	sn.maybePause(ctx, true)
	next := counter{N: cur.N + 1, Idem: append(cur.Idem, idem)}
	w := ex.w
	next.Write = w.invokeWrite(key, held.Token.Scope, held.Token.Epoch, sn.id, cur.N, next.N)
	wctx, cancel := clock.WithTimeout(context.Background(), w.fc, ex.requestTimeout())
	defer cancel()
	switch {
	case ex.fenced && ex.batchers != nil:
		_, err = ex.batchers[sn.idx].Put(wctx, held.Token, key, []byte(next.encode()))
	case ex.fenced:
		_, err = ex.stores[sn.idx].Put(wctx, held.Token, key, []byte(next.encode()))
	default:
		_, err = sn.cli.Put(wctx, dataPrefix+key, next.encode())
	}
	switch {
	case err == nil:
		w.rec.ReturnWrite(next.Write, check.Accepted, w.now())
		return done, next.N, true
	case errors.Is(err, fence.ErrStale):
		w.rec.ReturnWrite(next.Write, check.Rejected, w.now())
		return retry, 0, false
	default:
		w.rec.ReturnWrite(next.Write, check.Unknown, w.now())
		return maybe, 0, false
	}
}

func (ex *tenureEx) count(ctx context.Context, c *client, key string) (attempt, int64) {
	sn, held, ok := ex.owner(c, key)
	if !ok {
		return retry, 0
	}
	defer held.Release()
	cur, err := ex.read(sn, held.Token, key)
	if err != nil {
		return retry, 0
	}
	return done, cur.N
}

func (ex *tenureEx) final(key string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := ex.admin.Get(ctx, dataPrefix+key)
	if err != nil || len(resp.Kvs) == 0 {
		return ""
	}
	return strconv.FormatInt(decodeCounter(string(resp.Kvs[0].Value)).N, 10)
}

func (ex *tenureEx) close() {
	ex.hand.close()
	if ex.bal != nil {
		ex.bal.close()
	}
	var live []*ownership.Node
	for i, n := range ex.nodes {
		if ex.w.nodes[i].crashed.Load() {
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			_ = n.Close(ctx)
			continue
		}
		live = append(live, n)
	}
	for _, n := range live {
		ctx, cancel := clock.WithTimeout(context.Background(), ex.w.fc, time.Minute)
		_ = n.Close(ctx)
		cancel()
	}
	for _, b := range ex.batchers {
		b.Close()
	}
	ex.outside.Wait()
	ex.w.srv.OnCommit(nil)
	_ = ex.admin.Close()
}
