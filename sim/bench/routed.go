package bench

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/internal/workload"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/router"
)

// fleetNode is one node of an in-process fleet with its router.
type fleetNode struct {
	node   *ownership.Node
	router *router.Router
}

// joinFleet joins nodes ids to cluster name with parts partitions and
// waits until they serve every partition.
func joinFleet(ctx context.Context, cli *clientv3.Client, name string, parts int, ttl time.Duration, fencers []fence.Fencer, ids ...string) ([]*fleetNode, error) {
	var out []*fleetNode
	for _, id := range ids {
		n, err := joinNode(ctx, cli, name, id, "", parts, ttl, fencers)
		if err != nil {
			closeFleet(out)
			return nil, err
		}
		out = append(out, n)
	}
	nodes := make([]*ownership.Node, len(out))
	for i, n := range out {
		nodes[i] = n.node
	}
	if err := waitServing(ctx, parts, nodes...); err != nil {
		closeFleet(out)
		return nil, err
	}
	return out, nil
}

func joinNode(ctx context.Context, cli ownership.Client, name, id, addr string, parts int, ttl time.Duration, fencers []fence.Fencer) (*fleetNode, error) {
	cfg := ownership.DefaultConfig()
	cfg.Cluster = name
	cfg.NodeID = id
	cfg.Addr = addr
	cfg.Ring.Partitions = parts
	cfg.Session.TTL = ttl
	cfg.Fencers = fencers
	jctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	n, err := ownership.Join(jctx, cli, cfg)
	if err != nil {
		return nil, err
	}
	r, err := router.New(n, router.Config{})
	if err != nil {
		_ = n.Close(context.Background())
		return nil, err
	}
	return &fleetNode{node: n, router: r}, nil
}

func (f *fleetNode) close() {
	f.router.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = f.node.Close(ctx)
}

func closeFleet(ns []*fleetNode) {
	for _, n := range ns {
		n.close()
	}
}

func runRouted(ctx context.Context, e *env) ([]Section, error) {
	const workers, parts = 16, 64
	cfg := e.cfg
	cli, err := e.client(ctx, 3)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	name := e.name("bench-routed")
	store, err := etcdfence.New(cli, etcdfence.Config{Cluster: name, Prefix: "/bench/" + name + "/batched/"})
	if err != nil {
		return nil, err
	}
	fleet, err := joinFleet(ctx, cli, name, parts, 0, []fence.Fencer{store}, "a", "b", "c")
	if err != nil {
		return nil, err
	}
	defer closeFleet(fleet)
	batchers := map[*router.Router]*etcdfence.Batcher{}
	for _, m := range fleet {
		bt, err := etcdfence.NewBatcher(store, etcdfence.DefaultBatcherConfig())
		if err != nil {
			return nil, err
		}
		defer bt.Close()
		batchers[m.router] = bt
	}
	layout := keys.New(name)
	ownerOf := func(key string) *router.Router {
		for _, m := range fleet {
			if m.node.Lookup(key).Local {
				return m.router
			}
		}
		return fleet[0].router
	}
	sessions := make([]*concurrency.Session, workers)
	for i := range sessions {
		s, err := concurrency.NewSession(cli, concurrency.WithTTL(10))
		if err != nil {
			return nil, err
		}
		defer s.Close()
		sessions[i] = s
	}
	var rc *redis.Client
	redisNote := ""
	rs, err := startRedis(ctx, cfg.RedisServer)
	switch {
	case errors.Is(err, errSkip):
		redisNote = fmt.Sprintf("Redis rows skipped: %v.", err)
		cfg.progress("%s", redisNote)
	case err != nil:
		return nil, err
	default:
		defer rs.close()
		rc = redis.NewClient(&redis.Options{Addr: rs.addr, PoolSize: 2 * workers})
		defer rc.Close()
	}

	type op = func(keyset []string) func(w, i int) error
	routed := func(keyset []string) func(w, i int) error {
		return func(w, i int) error {
			key := keyset[i%len(keyset)]
			return ownerOf(key).Do(ctx, key, func(ctx context.Context, t fence.Token) error {
				claim := layout.Claim(ring.PartitionOf(key, fleet[0].node.Ring().Partitions()))
				_, err := etcdfence.ClaimGuarded(ctx, cli, claim, t, clientv3.OpPut("/bench/"+name+"/routed/"+key, strconv.Itoa(i)))
				return err
			})
		}
	}
	batched := func(keyset []string) func(w, i int) error {
		return func(w, i int) error {
			key := keyset[i%len(keyset)]
			r := ownerOf(key)
			return r.Do(ctx, key, func(ctx context.Context, t fence.Token) error {
				_, err := batchers[r].Put(ctx, t, key, []byte(strconv.Itoa(i)))
				return err
			})
		}
	}
	mutex := func(keyset []string) func(w, i int) error {
		return func(w, i int) error {
			key := keyset[i%len(keyset)]
			m := concurrency.NewMutex(sessions[w], "/bench/"+name+"/lock/"+key)
			if err := m.Lock(ctx); err != nil {
				return err
			}
			if _, err := cli.Put(ctx, "/bench/"+name+"/mutex/"+key, strconv.Itoa(i)); err != nil {
				_ = m.Unlock(ctx)
				return err
			}
			return m.Unlock(ctx)
		}
	}
	var tokens atomic.Int64
	jitter := func() time.Duration { return time.Duration(rand.Int64N(int64(time.Millisecond))) }
	redisOp := func(keyset []string) func(w, i int) error {
		return func(w, i int) error {
			key := keyset[i%len(keyset)]
			unlock, err := redisLock(ctx, rc, "lock:"+name+":"+key, strconv.FormatInt(tokens.Add(1), 10), 10*time.Second, time.Millisecond, jitter)
			if err != nil {
				return err
			}
			if _, err := cli.Put(ctx, "/bench/"+name+"/redis/"+key, strconv.Itoa(i)); err != nil {
				_ = unlock()
				return err
			}
			return unlock()
		}
	}
	plain := func(keyset []string) func(w, i int) error {
		return func(w, i int) error {
			key := keyset[i%len(keyset)]
			_, err := cli.Put(ctx, "/bench/"+name+"/plain/"+key, strconv.Itoa(i))
			return err
		}
	}

	many := make([]string, 64)
	for i := range many {
		many[i] = "key-" + strconv.Itoa(i)
	}
	n := cfg.scaled(480, 96)
	count := n
	var secs []Section
	for _, set := range []struct {
		name, title string
		keys        []string
	}{{"keys=64", "64 keys", many}, {"hotkey", "1 hot key", []string{"hot"}}} {
		impls := []struct {
			name string
			op   op
		}{
			{"tenure routed single writer (`Router.Do` + claim-guarded txn)", routed},
			{"tenure routed + group commit (`Router.Do` + `Batcher.Put`)", batched},
			{"etcd `concurrency.Mutex` per operation (Lock, Put, Unlock)", mutex},
		}
		if rc != nil {
			impls = append(impls, struct {
				name string
				op   op
			}{"Redis lock per operation (SET NX PX, Lua unlock) + unfenced Put", redisOp})
		}
		impls = append(impls, struct {
			name string
			op   op
		}{"ceiling: unfenced, unrouted etcd `Put`", plain})
		cands := make([]candidate, len(impls))
		for j, im := range impls {
			f := im.op(set.keys)
			cands[j] = candidate{name: im.name, run: func(context.Context) (float64, error) {
				start := time.Now()
				if err := workload.RunN(workers, count, f); err != nil {
					return 0, err
				}
				return float64(time.Since(start).Microseconds()) / float64(count), nil
			}}
		}
		count = max(workers, n/8)
		for _, c := range cands { // warm up
			if _, err := c.run(ctx); err != nil {
				return nil, fmt.Errorf("%s: %w", c.name, err)
			}
		}
		count = n
		samples, err := interleave(ctx, cfg.rounds(), cands)
		if err != nil {
			return nil, err
		}
		rows := rowsFrom(cands, samples, 0)
		for i := range rows {
			if rows[i].Name == cands[len(cands)-1].name || i == 0 {
				continue
			}
			if i == 1 {
				rows[i].Note = fmt.Sprintf("%.1fx the throughput of routed single writes", ratio(rows[0].Value, rows[i].Value))
				continue
			}
			rows[i].Note = fmt.Sprintf("tenure routed: %.1fx the throughput", ratio(rows[i].Value, rows[0].Value))
			if impls[i].name[:5] == "Redis" {
				rows[i].Note += "; **fences nothing**: a holder whose lock expired still writes"
			}
			if impls[i].name[:4] == "etcd" {
				rows[i].Note += "; fences nothing (the Put is not guarded by the lock)"
			}
		}
		sec := Section{
			Key:   "routed",
			Title: fmt.Sprintf("Routed single-writer writes vs per-operation locks, %s, 16 workers, %s", set.title, membersText(3)),
			Intro: fmt.Sprintf("3 nodes, %d partitions; %d writes per round, %d rounds interleaved. µs/write is wall time per write (the inverse of throughput). The Redis lock retries every 1–2ms while taken.", parts, n, cfg.rounds()),
			Unit:  "µs/write",
			Rows:  rows,
		}
		sec.Notes = append(sec.Notes, "The bench client, the 3 nodes and the 3 etcd members share this machine's cores: client-side CPU (routing, admission, building the guarded transaction) competes with etcd's.")
		if redisNote != "" {
			sec.Notes = append(sec.Notes, redisNote)
		}
		secs = append(secs, sec)
	}
	return secs, nil
}
