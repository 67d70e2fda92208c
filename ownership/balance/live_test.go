package balance

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/fleettest"
)

// This file is the live fleet of the balancer's real-etcd tests: nodes
// with a Router and an HTTP server on loopback, load sent through a
// router.Client.

// headerCost carries a request's cost in load units; the node's handler
// adds it to the one unit its Hold counts.
const headerCost = "X-Cost"

// liveNode is a node with its Router and HTTP server.
type liveNode struct {
	*ownership.Node
	rt     *router.Router
	srv    *http.Server
	served chan struct{}
}

// startNode joins node id (of capacity weight) with a Router and an HTTP
// server whose handler counts each request's cost as load and answers its
// node ID.
func startNode(t *testing.T, ctx context.Context, cli *clientv3.Client, name, id string, weight int, ringCfg ring.Config) *liveNode {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	cfg := ownership.DefaultConfig()
	cfg.Cluster, cfg.NodeID, cfg.Addr, cfg.Weight = name, id, ln.Addr().String(), weight
	cfg.Ring = ringCfg
	cfg.Session.TTL = 2 * time.Second
	cfg.DrainTimeout = 5 * time.Second
	cfg.LoadInterval, cfg.LoadWindow, cfg.LoadBudget = 20*time.Millisecond, time.Second, 1000
	n, err := ownership.Join(ctx, cli, cfg)
	if err != nil {
		_ = ln.Close()
		require.NoError(t, err)
	}
	ln0 := &liveNode{Node: n, served: make(chan struct{})}
	ln0.rt, err = router.New(n, router.Config{})
	require.NoError(t, err)
	h, err := ln0.rt.Handler(router.KeyFromPathValue("key"), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if c, err := strconv.ParseUint(r.Header.Get(headerCost), 10, 64); err == nil && c > 1 {
			n.AddLoad(r.PathValue("key"), c-1)
		}
		_, _ = io.WriteString(w, id)
	}))
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/k/{key}", h)
	ln0.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() {
		defer close(ln0.served)
		_ = ln0.srv.Serve(ln)
	}()
	t.Cleanup(func() { ln0.stop(t) })
	return ln0
}

// stop closes the node (handing its partitions off), then its server and
// router.
func (n *liveNode) stop(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := n.Close(ctx); err != nil && !errors.Is(err, ownership.ErrClosed) {
		t.Errorf("close node %s: %v", n.ID(), err)
	}
	sctx, scancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer scancel()
	if err := n.srv.Shutdown(sctx); err != nil {
		_ = n.srv.Close()
	}
	<-n.served
	n.rt.Close()
}

// liveStable returns nil once the nodes agree on one ring of exactly
// their IDs and every partition is served by its owner by that ring (the
// placements applied), at the same epoch and address as every node sees it.
func liveStable(nodes []*liveNode) error { return fleettest.StableAtErr(nodes, nil) }

func liveChanges(nodes []*liveNode) []func() <-chan struct{} {
	out := make([]func() <-chan struct{}, len(nodes))
	for i, n := range nodes {
		out[i] = n.Changed
	}
	return out
}

// keysOf returns one key of every partition of P.
func keysOf(parts int) []string {
	out := make([]string, parts)
	left := parts
	for i := 0; left > 0; i++ {
		k := "key-" + strconv.Itoa(i)
		if p := ring.PartitionOf(k, parts); out[p] == "" {
			out[p] = k
			left--
		}
	}
	return out
}

// load sends requests through c, round after round over keys (one
// request each a round), each with its cost, from workers goroutines, until stop; it counts the requests
// answered and keeps the failures.
type load struct {
	ok       atomic.Int64
	next     atomic.Int64
	mu       sync.Mutex
	failures []string
	stop     chan struct{}
	wg       sync.WaitGroup
}

func startLoad(ctx context.Context, c *router.Client, keys []string, cost map[string]uint64, workers int) *load {
	l := &load{stop: make(chan struct{})}
	for range workers {
		l.wg.Go(func() {
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				k := keys[(l.next.Add(1)-1)%int64(len(keys))]
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://fleet/k/"+k, http.NoBody)
				if err == nil {
					req.Header.Set(headerCost, strconv.FormatUint(cost[k], 10))
					var resp *http.Response
					if resp, err = c.Do(ctx, k, req); err == nil {
						_, _ = io.Copy(io.Discard, resp.Body)
						resp.Body.Close()
						if resp.StatusCode != http.StatusOK {
							err = fmt.Errorf("status %s", resp.Status)
						}
					}
				}
				if err == nil {
					l.ok.Add(1)
					continue
				}
				if ctx.Err() == nil {
					l.mu.Lock()
					l.failures = append(l.failures, k+": "+err.Error())
					l.mu.Unlock()
				}
			}
		})
	}
	return l
}

// halt stops the load and returns the requests answered and the failures.
func (l *load) halt() (int64, []string) {
	select {
	case <-l.stop:
	default:
		close(l.stop)
	}
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.ok.Load(), slices.Clone(l.failures)
}

// ticker returns a change function for fleettest.WaitFor whose channel
// closes at the next tick of a ticker of period d, for conditions that
// change without an event to wait on (load reports, metrics of passes
// that write nothing). The ticker stops when t ends.
func ticker(t *testing.T, d time.Duration) func() <-chan struct{} {
	tick := time.NewTicker(d)
	done := make(chan struct{})
	t.Cleanup(func() { tick.Stop(); close(done) })
	return func() <-chan struct{} {
		ch := make(chan struct{})
		go func() {
			select {
			case <-tick.C:
			case <-done:
			}
			close(ch)
		}()
		return ch
	}
}
