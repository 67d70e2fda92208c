package bench

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/router"
)

// servingNode is a fleet node that serves HTTP on loopback.
type servingNode struct {
	*fleetNode
	id  string
	srv *http.Server
}

// startServing joins node id and serves POST /k/{key} (a fenced Put of the
// key under its partition's token) through the node's router.
func startServing(ctx context.Context, cli *clientv3.Client, name, id string, parts int, store *etcdfence.Store) (*servingNode, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	fn, err := joinNode(ctx, cli, name, id, l.Addr().String(), parts, 0, []fence.Fencer{store})
	if err != nil {
		l.Close()
		return nil, err
	}
	local := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.PathValue("key")
		tok, ok := fence.FromContext(r.Context())
		if !ok {
			http.Error(w, "no token", http.StatusInternalServerError)
			return
		}
		if _, err := store.Put(r.Context(), tok, key, value); err != nil {
			router.WriteError(w, r, err)
			return
		}
		w.WriteHeader(http.StatusNoContent)
	})
	h, err := fn.router.Handler(router.KeyFromPathValue("key"), local)
	if err != nil {
		fn.close()
		l.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/k/{key}", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return &servingNode{fleetNode: fn, id: id, srv: srv}, nil
}

// stop leaves gracefully: the node hands its partitions off (draining the
// work in flight), then the server and the router stop.
func (s *servingNode) stop() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = s.node.Close(ctx)
	_ = s.srv.Shutdown(ctx)
	s.router.Close()
}

func runRolling(ctx context.Context, e *env) ([]Section, error) {
	const nodes, parts, workers, nkeys = 4, 256, 8, 256
	cfg := e.cfg
	cycles := cfg.scaled(2, 1)
	steadyFor := time.Duration(cfg.scaled(4000, 1500)) * time.Millisecond
	// dwell is the pause after each restart, as a deploy waits between
	// processes, counted in the moves: the window then has the same length
	// whatever a handoff takes, and holds what follows each move.
	dwell := time.Duration(cfg.scaled(500, 200)) * time.Millisecond
	cli, err := e.client(ctx, 3)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	name := e.name("bench-rolling")
	store, err := etcdfence.New(cli, etcdfence.Config{Cluster: name, Prefix: "/bench/" + name + "/data/"})
	if err != nil {
		return nil, err
	}
	fleet := make([]*servingNode, nodes)
	defer func() {
		for _, n := range fleet {
			if n != nil {
				n.stop()
			}
		}
	}()
	for i := range fleet {
		if fleet[i], err = startServing(ctx, cli, name, fmt.Sprintf("node-%d", i+1), parts, store); err != nil {
			return nil, err
		}
	}
	live := func() []*ownership.Node {
		var ns []*ownership.Node
		for _, n := range fleet {
			ns = append(ns, n.node)
		}
		return ns
	}
	if err := waitServing(ctx, parts, live()...); err != nil {
		return nil, err
	}
	c, err := router.NewClient(ctx, cli, router.ClientConfig{Cluster: name})
	if err != nil {
		return nil, err
	}
	defer c.Close()

	// The load: workers posting to random keys until stop; each call is
	// recorded with the phase it started in.
	const (
		steady = iota
		moving
		idle
	)
	var phase atomic.Int32
	phase.Store(idle)
	type sample struct {
		phase int32
		took  time.Duration
		err   bool
	}
	var mu sync.Mutex
	var all []sample
	var firstErr error
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			var mine []sample
			defer func() {
				mu.Lock()
				all = append(all, mine...)
				mu.Unlock()
			}()
			for {
				select {
				case <-stop:
					return
				default:
				}
				key := "key-" + strconv.Itoa(rng.IntN(nkeys))
				ph := phase.Load()
				start := time.Now()
				req, _ := http.NewRequestWithContext(ctx, http.MethodPost, "http://tenure/k/"+key, bytes.NewReader(value)) // a valid URL
				req.Header.Set("Content-Type", "text/plain")
				resp, err := c.Do(ctx, key, req)
				took := time.Since(start)
				failed := err != nil
				if err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if resp.StatusCode != http.StatusNoContent {
						failed = true
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				if failed {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
				if ph != idle {
					mine = append(mine, sample{ph, took, failed})
				}
			}
		})
	}
	restarted := 0
	var runErr error
	for range cycles {
		phase.Store(steady)
		if !sleepCtx(ctx, steadyFor) {
			runErr = ctx.Err()
			break
		}
		phase.Store(moving)
		for i := range fleet {
			fleet[i].stop()
			id := fleet[i].id
			fleet[i] = nil
			if fleet[i], runErr = startServing(ctx, cli, name, id, parts, store); runErr != nil {
				break
			}
			if runErr = waitServing(ctx, parts, live()...); runErr != nil {
				break
			}
			restarted++
			if !sleepCtx(ctx, dwell) {
				runErr = ctx.Err()
				break
			}
		}
		phase.Store(idle)
		if runErr != nil {
			break
		}
	}
	close(stop)
	wg.Wait()
	if runErr != nil {
		return nil, runErr
	}
	var lat [2][]time.Duration
	var errs, reqs [2]int
	for _, s := range all {
		reqs[s.phase]++
		if s.err {
			errs[s.phase]++
			continue
		}
		lat[s.phase] = append(lat[s.phase], s.took)
	}
	for i := range lat {
		slices.Sort(lat[i])
	}
	st := c.Stats()
	p := func(ph int, q float64) float64 { return ms(percentile(lat[ph], q)) }
	row := func(name string, v, ref float64, n int, note string) Row {
		return Row{Name: name, Value: v, Allocs: -1, Ratio: ratio(v, ref), Samples: n, Note: note}
	}
	rows := []Row{
		row("steady: p50 latency (ms)", p(steady, 50), p(steady, 50), cycles, fmt.Sprintf("%d requests", reqs[steady])),
		row("during moves: p50 latency (ms)", p(moving, 50), p(steady, 50), cycles, fmt.Sprintf("%d requests", reqs[moving])),
		row("steady: p99 latency (ms)", p(steady, 99), p(steady, 99), cycles, ""),
		row("during moves: p99 latency (ms)", p(moving, 99), p(steady, 99), cycles, fmt.Sprintf("added p99: %+.1f ms", p(moving, 99)-p(steady, 99))),
		row("during moves: max latency (ms)", p(moving, 100), p(steady, 100), cycles, fmt.Sprintf("steady max %.1f ms", p(steady, 100))),
		{Name: "requests failed at the caller (steady + moves)", Value: float64(errs[steady] + errs[moving]), Allocs: -1,
			Ratio: ratio(float64(errs[steady]+errs[moving]), float64(reqs[steady]+reqs[moving])), Samples: cycles,
			Note: fmt.Sprintf("ratio column: share of all %d requests; %d retried attempts (refusals and refused connections) absorbed by the Client", reqs[steady]+reqs[moving], st.Retries)},
	}
	notes := []string{}
	if firstErr != nil {
		notes = append(notes, fmt.Sprintf("First failure seen by the caller: %v", firstErr))
	}
	return []Section{{
		Key:         "rolling",
		Title:       "Rolling restart of a 4-node fleet under load, through `router.Client`",
		Intro:       fmt.Sprintf("4 nodes (%d partitions, %s), each serving HTTP on loopback; %d workers post fenced Puts (`etcdfence.Store.Put` under the partition's token) to %d keys through `router.Client`. Each cycle: %v steady, then every node in turn leaves gracefully and rejoins (same ID, new port), waiting until all partitions are served again and then %v more, as a deploy pauses between processes; %d cycles, %d restarts. \"During moves\" is every call begun from a cycle's first leave to the end of its last pause: a window of the same length whatever a handoff takes. Latency of every call, retries included.", parts, membersText(3), workers, nkeys, steadyFor, dwell, cycles, restarted),
		Unit:        "value",
		RatioHeader: "x steady",
		Rows:        rows,
		Notes:       notes,
	}}, nil
}

// sleepCtx sleeps for d; false if ctx ended first.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}
