package simulation

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/tenure-go/tenure/internal/clock"
	"github.com/tenure-go/tenure/sim/check"
)

// memStore is the baselines' unfenced store: it applies every write it
// gets, in arrival order, logging each into the Recorder as it applies it.
type memStore struct {
	w    *world
	mu   sync.Mutex
	data map[string]string
}

func (s *memStore) get(key string) counter {
	s.mu.Lock()
	defer s.mu.Unlock()
	return decodeCounter(s.data[key])
}

func (s *memStore) put(c counter, key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.data[key] = c.encode()
	s.w.rec.Applied(c.Write, s.w.now())
}

// redis is a simulated Redis on the virtual clock: the two commands of
// the classic lock (SET key value NX PX ttl; a Lua compare-and-delete).
type redis struct {
	w    *world
	mu   sync.Mutex
	keys map[string]redisEntry
	seq  map[string]int64 // successful SETs per key: the token a fencing lock would have handed out
}

type redisEntry struct {
	value  string
	expiry time.Time
}

// setNX is SET key value NX PX ttl. It returns whether the key was set and
// the acquisition's sequence number.
func (r *redis) setNX(key, value string, ttl time.Duration) (bool, int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.w.fc.Now()
	if e, ok := r.keys[key]; ok && now.Before(e.expiry) {
		return false, 0
	}
	r.keys[key] = redisEntry{value: value, expiry: now.Add(ttl)}
	r.seq[key]++
	return true, r.seq[key]
}

// compareAndDelete is the Lua unlock: delete key iff it still holds value.
func (r *redis) compareAndDelete(key, value string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	e, ok := r.keys[key]
	if !ok || e.value != value || !r.w.fc.Now().Before(e.expiry) {
		return false
	}
	delete(r.keys, key)
	return true
}

// lockEx is a per-operation lock baseline: lock the key, read, write the
// unfenced store, unlock. The lock is a Redis SET NX PX or etcd's
// concurrency.Mutex.
type lockEx struct {
	w     *world
	store *memStore
	redis *redis // nil for the etcd mutex
	mu    sync.Mutex
	sess  map[sessKey]*concurrency.Session
	seq   int
	epoch map[string]int64
}

func (ex *lockEx) nextEpoch(scope string) int64 {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	ex.epoch[scope]++
	return ex.epoch[scope]
}

func newLockEx(w *world, useRedis bool) *lockEx {
	ex := &lockEx{w: w, store: &memStore{w: w, data: map[string]string{}}, sess: map[sessKey]*concurrency.Session{}, epoch: map[string]int64{}}
	if useRedis {
		ex.redis = &redis{w: w, keys: map[string]redisEntry{}, seq: map[string]int64{}}
	}
	return ex
}

// sessKey names one worker's etcd session: each client has its own
// session on each node, since etcd's Mutex keys a waiter by its lease and
// two goroutines sharing a session would both "hold" the lock.
type sessKey struct{ node, client int }

// held is one acquisition of a key's lock.
type held struct {
	holder string
	scope  string
	epoch  int64
	unlock func()
}

// lock acquires key's lock on node sn, within the attempt's time.
func (ex *lockEx) lock(ctx context.Context, c *client, sn *simNode, key string) (held, bool) {
	w := ex.w
	ex.mu.Lock()
	ex.seq++
	value := fmt.Sprintf("%s/%s/%d", sn.id, c.name, ex.seq)
	ex.mu.Unlock()
	h := held{holder: sn.id + "/" + c.name, scope: "lock/" + key}
	if ex.redis != nil {
		deadline := w.now() + w.cfg.TTL
		for w.now() < deadline {
			if ok, seq := ex.redis.setNX("lock/"+key, value, w.cfg.TTL); ok {
				h.epoch = seq
				h.unlock = func() { ex.redis.compareAndDelete("lock/"+key, value) }
				return h, true
			}
			if !clock.Sleep(ctx, w.fc, 10*time.Millisecond) {
				break
			}
		}
		return held{}, false
	}
	sess, err := ex.session(ctx, sn, c)
	if err != nil {
		return held{}, false
	}
	m := concurrency.NewMutex(sess, "/mutex/"+key)
	lctx, cancel := clock.WithTimeout(ctx, w.fc, w.cfg.TTL)
	defer cancel()
	if err := m.Lock(lctx); err != nil {
		return held{}, false
	}
	// etcd's Mutex hands out no token; number its acquisitions of the key
	// in the order they returned, as a fencing lock would have.
	h.epoch = ex.nextEpoch(h.scope)
	h.unlock = func() {
		uctx, cancel := clock.WithTimeout(context.Background(), w.fc, w.cfg.TTL/2)
		defer cancel()
		_ = m.Unlock(uctx)
	}
	return h, true
}

// session returns client c's etcd concurrency.Session on node sn, opening
// a new one if the last has ended.
func (ex *lockEx) session(ctx context.Context, sn *simNode, c *client) (*concurrency.Session, error) {
	k := sessKey{sn.idx, c.idx}
	ex.mu.Lock()
	s := ex.sess[k]
	ex.mu.Unlock()
	if s != nil {
		select {
		case <-s.Done():
		default:
			return s, nil
		}
	}
	cli := clientv3.NewCtxClient(ex.w.ctx)
	cli.KV, cli.Lease, cli.Watcher = sn.cli, sn.cli, sn.cli
	gctx, cancel := clock.WithTimeout(ctx, ex.w.fc, ex.w.cfg.TTL)
	defer cancel()
	// The session's keep-alive lives as long as the run; its grant is
	// bounded by the attempt.
	lease, err := sn.cli.Grant(gctx, int64(ex.w.cfg.TTL/time.Second))
	if err != nil {
		return nil, err
	}
	s, err = concurrency.NewSession(cli, concurrency.WithLease(lease.ID), concurrency.WithContext(ex.w.ctx))
	if err != nil {
		return nil, err
	}
	ex.mu.Lock()
	ex.sess[k] = s
	ex.mu.Unlock()
	return s, nil
}

func (ex *lockEx) incr(ctx context.Context, c *client, key, idem string) (attempt, int64, bool) {
	w := ex.w
	sn := w.liveNode(c.rng)
	if sn == nil {
		return retry, 0, false
	}
	h, ok := ex.lock(ctx, c, sn, key)
	if !ok {
		return retry, 0, false
	}
	w.rec.BeginTenure(h.scope, h.epoch, h.holder, w.now())
	defer func() {
		h.unlock()
		w.rec.EndTenure(h.scope, h.epoch, h.holder, w.now())
	}()
	cur := ex.store.get(key)
	if cur.has(idem) {
		return done, 0, false
	}
	sn.maybePause(ctx, ex.redis == nil)
	next := counter{N: cur.N + 1, Idem: append(cur.Idem, idem)}
	next.Write = w.invokeWrite(key, h.scope, h.epoch, h.holder, cur.N, next.N)
	ex.store.put(next, key)
	if sn.loseNext() {
		w.rec.ReturnWrite(next.Write, check.Unknown, w.now())
		return maybe, 0, false
	}
	w.rec.ReturnWrite(next.Write, check.Accepted, w.now())
	return done, next.N, true
}

func (ex *lockEx) count(ctx context.Context, c *client, key string) (attempt, int64) {
	return done, ex.store.get(key).N
}

func (ex *lockEx) final(key string) string {
	return strconv.FormatInt(ex.store.get(key).N, 10)
}

func (ex *lockEx) close() {
	ex.mu.Lock()
	defer ex.mu.Unlock()
	for k, s := range ex.sess {
		if ex.w.nodes[k.node].crashed.Load() {
			continue
		}
		_ = s.Close() // its context (the workload's) has ended: revocation is not awaited
	}
}
