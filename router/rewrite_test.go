package router_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httputil"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/httpfence"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestForwardRewrite: Config.Rewrite adds headers to the requests a router
// forwards, and the owner sees them on a real forward over loopback; what
// the router sets stays the router's (the target, the hop, no token), and
// requests served where they land are not rewritten.
func TestForwardRewrite(t *testing.T) {
	etcd := cluster.New(t, 1)
	reqs := make(chan http.Header, 4)
	f := newFleet(t, etcd, "rewrite", fleetOptions{
		Router: router.Config{Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.Header.Set("X-Fleet-Identity", "node-credential")
			pr.Out.Header.Set("X-Target", pr.Out.URL.Host)
			pr.Out.URL.Host = "127.0.0.1:1"                     // set again by the router
			pr.Out.Header.Set(httpfence.Header, "p/0@999")      // removed by the router
			pr.Out.Header.Set(router.HeaderForwarded, "nobody") // set again by the router
		}},
		Handler: func(m *member) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				reqs <- r.Header.Clone()
				_, _ = io.WriteString(w, "served by "+m.id)
			})
		},
	})
	f.start("a")
	f.start("b")
	f.waitStable()
	hc := newHTTPClient(t)
	const key = "rewritten"
	owner, other := f.owner(key), f.nonOwner(key)
	route := owner.node.Lookup(key)
	tok := fence.Token{Scope: fence.PartitionScope(route.Partition), Epoch: route.Epoch}

	resp, err := hc.Get("http://" + other.addr + "/k/" + key)
	require.NoError(t, err)
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
	assert.Equal(t, "served by "+owner.id, string(body))
	h := <-reqs
	assert.Equal(t, "node-credential", h.Get("X-Fleet-Identity"), "the hook's header reached the owner")
	assert.Equal(t, owner.addr, h.Get("X-Target"), "the hook sees the owner's address")
	assert.Equal(t, []string{other.id}, h.Values(router.HeaderForwarded))
	assert.Equal(t, tok.String(), h.Get(httpfence.Header), "the owner's own token, never the hook's")

	resp, err = hc.Get("http://" + owner.addr + "/k/" + key)
	require.NoError(t, err)
	resp.Body.Close()
	h = <-reqs
	assert.Empty(t, h.Get("X-Fleet-Identity"), "a request served where it lands is not rewritten")
	assert.Empty(t, h.Values(router.HeaderForwarded))
}

// TestWriteErrorWorkCutShort: a local handler whose fenced work is cut
// short because its tenure ended (the node closes, handing the partition
// off, while the request is in flight) answers through WriteError, the one
// writer of a handler's errors, with the retryable handoff refusal and the
// partition's hint, never with an answer the caller cannot retry. The
// handler waits for its context, which ends once the drain timeout has
// passed.
func TestWriteErrorWorkCutShort(t *testing.T) {
	etcd := cluster.New(t, 1)
	entered := make(chan struct{}, 1)
	f := newFleet(t, etcd, "cutshort", fleetOptions{Partitions: 4, DrainTimeout: 200 * time.Millisecond,
		Handler: func(m *member) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				entered <- struct{}{}
				<-r.Context().Done() // the fenced write, cut short
				if !router.WriteError(w, r, fmt.Errorf("store: %w", r.Context().Err())) {
					http.Error(w, "the handler's error was not answered", http.StatusInternalServerError)
				}
			})
		}})
	m := f.start("solo")
	f.waitStable()
	const key = "cut"
	part := m.node.Lookup(key).Partition
	hc := newHTTPClient(t)
	type answer struct {
		resp *http.Response
		err  error
	}
	got := make(chan answer, 1)
	go func() {
		resp, err := hc.Get("http://" + m.addr + "/k/" + key)
		got <- answer{resp, err}
	}()
	<-entered
	closed := make(chan error, 1)
	go func() { closed <- m.node.Close(context.Background()) }()
	a := <-got
	require.NoError(t, a.err)
	assert.Equal(t, http.StatusServiceUnavailable, a.resp.StatusCode)
	ref := readRefusal(t, a.resp)
	assert.Equal(t, httpfence.RefusalHandoff, ref.Kind, ref.Message)
	assert.True(t, ref.Retryable())
	assert.Equal(t, part, router.HintOf(ref).Partition)
	assert.NotEqual(t, m.id, router.HintOf(ref).Owner, "the answer never names the answering node")
	require.NoError(t, <-closed)
}
