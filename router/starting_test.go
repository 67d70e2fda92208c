package router_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
	"github.com/tenure-go/tenure/sim/fleettest"
)

// refusalSpy is a node that tells which keys its Hold has refused: the
// calls for them wait for the node.
type refusalSpy struct {
	*ownership.Node
	fleettest.Refusals
}

func (s *refusalSpy) Hold(key string) (ownership.Held, error) {
	h, err := s.Node.Hold(key)
	s.Record(key, err)
	return h, err
}

// TestCallsWaitForOnAcquired: calls that reach a node while the OnAcquired
// of their partition runs (a partition that loads its state there) wait,
// through Do, through the HTTP handler and as requests another node
// forwarded, and are answered once OnAcquired has returned: neither
// refused nor served before it.
func TestCallsWaitForOnAcquired(t *testing.T) {
	etcd := cluster.New(t, 1)
	gate := make(chan struct{})
	entered := make(chan struct{}, 1)
	var returned atomic.Bool
	cfg := ownership.DefaultConfig()
	cfg.Cluster = "starting"
	cfg.NodeID = "a"
	cfg.Addr = "127.0.0.1:1"
	cfg.Ring.Partitions = 1 // every key in partition 0
	cfg.Session.TTL = 2 * time.Second
	cfg.AcquiredTimeout = time.Hour // only OnAcquired's return admits work here
	cfg.Callbacks.OnAcquired = func(e ownership.Event) {
		entered <- struct{}{}
		select {
		case <-gate:
		case <-e.Context.Done():
		}
		returned.Store(true)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	node, err := ownership.Join(ctx, etcd.NewClient(t), cfg)
	require.NoError(t, err)
	defer func() { require.NoError(t, node.Close(context.Background())) }()
	spy := &refusalSpy{Node: node}
	rt, err := router.New(spy, router.Config{HandoffWait: time.Hour}) // bounded by the calls' ctx
	require.NoError(t, err)
	defer rt.Close()

	var early atomic.Int64         // calls served before OnAcquired returned
	served := make(chan string, 3) // the key of every call served
	h, err := rt.Handler(router.KeyFromPathValue("key"), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !returned.Load() {
			early.Add(1)
		}
		served <- r.PathValue("key")
		_, _ = io.WriteString(w, "ok")
	}))
	require.NoError(t, err)
	mux := http.NewServeMux()
	mux.Handle("/k/{key}", h)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	<-entered

	do := make(chan error, 1)
	go func() {
		do <- rt.Do(ctx, "do", func(context.Context, fence.Token) error {
			if !returned.Load() {
				early.Add(1)
			}
			served <- "do"
			return nil
		})
	}()
	type answer struct {
		status int
		body   string
		err    error
	}
	get := func(key, forwardedBy string) <-chan answer {
		out := make(chan answer, 1)
		go func() {
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/k/"+key, nil)
			if err != nil {
				out <- answer{err: err}
				return
			}
			if forwardedBy != "" {
				req.Header.Set(router.HeaderForwarded, forwardedBy)
			}
			resp, err := srv.Client().Do(req)
			if err != nil {
				out <- answer{err: err}
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			out <- answer{status: resp.StatusCode, body: string(b), err: err}
		}()
		return out
	}
	plain, forwarded := get("http", ""), get("fwd", "b")

	spy.WaitRefused(t, served, "do", "http", "fwd") // every call waits for the node
	require.False(t, node.Lookup("do").Local)
	close(gate)

	require.NoError(t, <-do)
	for name, ch := range map[string]<-chan answer{"plain": plain, "forwarded": forwarded} {
		a := <-ch
		require.NoError(t, a.err, name)
		assert.Equal(t, http.StatusOK, a.status, "%s: %s", name, a.body)
		assert.Equal(t, "ok", a.body, name)
	}
	assert.Zero(t, early.Load(), "calls served before OnAcquired returned")
	st := rt.Stats()
	assert.Equal(t, int64(3), st.Served)
	assert.Zero(t, st.Refused)
	assert.Zero(t, st.Forwarded)
}
