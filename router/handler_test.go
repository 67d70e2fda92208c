package router_test

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/httpfence"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
)

// seen is what a local handler observed of one request.
type seen struct {
	node      string
	token     fence.Token
	tokenOK   bool
	header    string
	forwarded []string
	ring      string
	idem      string
}

// recorder is a local handler that reports each request it serves.
func recorder(m *member, ch chan<- seen) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := fence.FromContext(r.Context())
		ch <- seen{
			node: m.id, token: tok, tokenOK: ok, header: r.Header.Get(httpfence.Header),
			forwarded: r.Header.Values(router.HeaderForwarded), ring: r.Header.Get(router.HeaderRingVersion),
			idem: r.Header.Get(router.HeaderIdempotencyKey),
		}
		fmt.Fprintf(w, "served by %s", m.id)
	})
}

// readRefusal reads and closes the body of resp, which must be a refusal.
func readRefusal(t *testing.T, resp *http.Response) *httpfence.Refusal {
	t.Helper()
	defer resp.Body.Close()
	ref, err := httpfence.ReadRefusal(resp)
	require.NoError(t, err)
	require.NotNil(t, ref, "status %d is no refusal", resp.StatusCode)
	return ref
}

func newHTTPClient(t *testing.T) *http.Client {
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

func TestHandlerLocalForwardMisdirected(t *testing.T) {
	etcd := cluster.New(t, 1)
	reqs := make(chan seen, 16)
	f := newFleet(t, etcd, "http", fleetOptions{Handler: func(m *member) http.Handler { return recorder(m, reqs) }})
	for _, id := range []string{"a", "b", "c"} {
		f.start(id)
	}
	f.waitStable()
	hc := newHTTPClient(t)
	before := map[string]router.Stats{}
	for _, m := range f.list() {
		before[m.id] = m.router.Stats()
	}
	want := map[string]router.Stats{}

	for i := range 10 {
		key := "key-" + strconv.Itoa(i)
		owner, other := f.owner(key), f.nonOwner(key)
		route := owner.node.Lookup(key)
		wantTok := fence.Token{Scope: fence.PartitionScope(route.Partition), Epoch: route.Epoch}

		t.Run(key+"/local", func(t *testing.T) {
			req, _ := http.NewRequest("GET", "http://"+owner.addr+"/k/"+key, nil)
			req.Header.Set(httpfence.Header, "forged@999") // never trusted
			resp, err := hc.Do(req)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
			s := <-reqs
			assert.Equal(t, owner.id, s.node)
			assert.True(t, s.tokenOK)
			assert.Equal(t, wantTok, s.token)
			assert.Equal(t, wantTok.String(), s.header)
			assert.Empty(t, s.forwarded)
			st := want[owner.id]
			st.Served++
			want[owner.id] = st
		})

		t.Run(key+"/forwarded", func(t *testing.T) {
			req, _ := http.NewRequest("GET", "http://"+other.addr+"/k/"+key, nil)
			req.Header.Set(httpfence.Header, "forged@999")
			resp, err := hc.Do(req)
			require.NoError(t, err)
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
			assert.Equal(t, "served by "+owner.id, string(body))
			s := <-reqs
			assert.Equal(t, owner.id, s.node)
			assert.Equal(t, wantTok, s.token)
			assert.Equal(t, wantTok.String(), s.header)
			assert.Equal(t, []string{other.id}, s.forwarded, "one hop, named by the forwarding node")
			assert.Equal(t, strconv.FormatUint(other.node.Lookup(key).RingVersion, 10), s.ring)
			st := want[owner.id]
			st.Served++
			want[owner.id] = st
			st = want[other.id]
			st.Forwarded++
			want[other.id] = st
		})

		t.Run(key+"/misdirected", func(t *testing.T) {
			// A forwarded request that lands on a non-owner is never
			// forwarded again.
			req, _ := http.NewRequest("POST", "http://"+other.addr+"/k/"+key, strings.NewReader("body"))
			req.Header.Set(router.HeaderForwarded, "elsewhere")
			resp, err := hc.Do(req)
			require.NoError(t, err)
			require.Equal(t, http.StatusMisdirectedRequest, resp.StatusCode)
			ref := readRefusal(t, resp)
			assert.Equal(t, httpfence.RefusalNotOwner, ref.Kind)
			assert.True(t, ref.Retryable())
			hint := router.HintOf(ref)
			assert.Equal(t, route.Partition, hint.Partition)
			assert.Equal(t, owner.id, hint.Owner)
			assert.Equal(t, owner.addr, hint.Addr)
			assert.Equal(t, route.Epoch, hint.Epoch)
			assert.Equal(t, other.node.Lookup(key).RingVersion, hint.RingVersion)
			select {
			case s := <-reqs:
				t.Fatalf("misdirected request was served by %s", s.node)
			default:
			}
			st := want[other.id]
			st.Refused++
			want[other.id] = st
		})
	}
	for _, m := range f.list() {
		b, got := before[m.id], m.router.Stats()
		assert.Equal(t, want[m.id], router.Stats{Served: got.Served - b.Served, Forwarded: got.Forwarded - b.Forwarded,
			Refused: got.Refused - b.Refused}, "stats of %s", m.id)
	}

	t.Run("bad key", func(t *testing.T) {
		m := f.list()[0]
		h, err := m.router.Handler(router.KeyFromHeader("X-Key"), http.NotFoundHandler())
		require.NoError(t, err)
		srv := &http.Server{Handler: h}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		go srv.Serve(ln)
		defer srv.Close()
		resp, err := hc.Get("http://" + ln.Addr().String() + "/")
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
		assert.Contains(t, string(body), "no key")
	})
}

// ghost registers a member that never claims anything, so that the ring
// gives it partitions nobody serves. It returns a key of one of them.
func ghost(t *testing.T, f *testFleet, id, addr string) string {
	t.Helper()
	f.putMember(t, id, memberValue(t, id, addr))
	f.waitStable(id)
	rg := f.list()[0].node.Ring()
	for i := range 100000 {
		k := "ghost-" + strconv.Itoa(i)
		if o, _ := rg.Owner(ring.PartitionOf(k, rg.Partitions())); o == id {
			return k
		}
	}
	t.Fatal("ghost owns nothing")
	return ""
}

func TestHandlerNoOwnerAndForwardFailure(t *testing.T) {
	etcd := cluster.New(t, 1)
	f := newFleet(t, etcd, "ghost", fleetOptions{Router: router.Config{HandoffWait: 50 * time.Millisecond}})
	a := f.start("a")
	f.waitStable()
	hc := newHTTPClient(t)

	t.Run("no address", func(t *testing.T) {
		key := ghost(t, f, "ghost-noaddr", "")
		resp, err := hc.Get("http://" + a.addr + "/k/" + key)
		require.NoError(t, err)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		assert.NotEmpty(t, resp.Header.Get("Retry-After"))
		ref := readRefusal(t, resp)
		assert.Equal(t, httpfence.RefusalHandoff, ref.Kind)
		assert.Equal(t, "ghost-noaddr", router.HintOf(ref).Owner)
		assert.Empty(t, router.HintOf(ref).Addr)

		err = a.router.Do(context.Background(), key, func(context.Context, fence.Token) error { return nil })
		assert.ErrorIs(t, err, ownership.ErrNoOwner)
		assert.ErrorIs(t, err, ownership.ErrNotOwner)
	})

	t.Run("unreachable", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		dead := ln.Addr().String()
		require.NoError(t, ln.Close())
		key := ghost(t, f, "ghost-dead", dead)
		resp, err := hc.Get("http://" + a.addr + "/k/" + key)
		require.NoError(t, err)
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		ref := readRefusal(t, resp)
		assert.Equal(t, httpfence.RefusalHandoff, ref.Kind)
		assert.Equal(t, dead, router.HintOf(ref).Addr)
		assert.Contains(t, ref.Message, "forward")
	})
}

// TestHandlerStreamingAndCancellation sends requests to a non-owner and
// shows that bodies stream through the hop in both directions and that the
// client's cancellation and timeout reach the owner's handler.
func TestHandlerStreamingAndCancellation(t *testing.T) {
	etcd := cluster.New(t, 1)
	step := make(chan struct{})
	started := make(chan struct{}, 1)
	ended := make(chan error, 1)
	f := newFleet(t, etcd, "stream", fleetOptions{Handler: func(m *member) http.Handler {
		mux := http.NewServeMux()
		// Hashes the request body as it streams in.
		mux.HandleFunc("POST /k/{key}/hash", func(w http.ResponseWriter, r *http.Request) {
			h := sha256.New()
			n, err := io.Copy(h, r.Body)
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			fmt.Fprintf(w, "%d %s", n, hex.EncodeToString(h.Sum(nil)))
		})
		// Writes one line per step, flushing each.
		mux.HandleFunc("GET /k/{key}/lines", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/plain")
			for i := range 3 {
				fmt.Fprintf(w, "line %d\n", i)
				w.(http.Flusher).Flush()
				select {
				case <-step:
				case <-r.Context().Done():
					return
				}
			}
		})
		// Blocks until the request's context ends.
		mux.HandleFunc("GET /k/{key}/block", func(w http.ResponseWriter, r *http.Request) {
			started <- struct{}{}
			<-r.Context().Done()
			ended <- context.Cause(r.Context())
		})
		return mux
	}})
	for _, id := range []string{"a", "b"} {
		f.start(id)
	}
	f.waitStable()
	hc := newHTTPClient(t)
	key := "stream-key"
	other := f.nonOwner(key)
	base := "http://" + other.addr + "/k/" + key

	t.Run("request body", func(t *testing.T) {
		pr, pw := io.Pipe()
		h := sha256.New()
		const chunks, size = 64, 64 << 10
		go func() {
			chunk := make([]byte, size)
			for i := range chunks {
				for j := range chunk {
					chunk[j] = byte(i + j)
				}
				h.Write(chunk)
				if _, err := pw.Write(chunk); err != nil {
					return
				}
			}
			pw.Close()
		}()
		req, _ := http.NewRequest("POST", base+"/hash", pr) // unknown length: chunked
		resp, err := hc.Do(req)
		require.NoError(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode, string(body))
		assert.Equal(t, fmt.Sprintf("%d %s", chunks*size, hex.EncodeToString(h.Sum(nil))), string(body))
	})

	t.Run("response body", func(t *testing.T) {
		resp, err := hc.Get(base + "/lines")
		require.NoError(t, err)
		defer resp.Body.Close()
		br := bufio.NewReader(resp.Body)
		for i := range 3 {
			// The handler writes line i+1 only after it gets a step, which
			// is sent only after line i arrived here through the hop.
			line, err := br.ReadString('\n')
			require.NoError(t, err)
			assert.Equal(t, fmt.Sprintf("line %d\n", i), line)
			step <- struct{}{}
		}
	})

	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/block", nil)
		errc := make(chan error, 1)
		go func() {
			resp, err := hc.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			errc <- err
		}()
		<-started
		cancel()
		require.ErrorIs(t, <-errc, context.Canceled)
		require.Error(t, <-ended, "the owner's handler saw the cancellation")
	})

	t.Run("timeout", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, "GET", base+"/block", nil)
		resp, err := hc.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		require.ErrorIs(t, err, context.DeadlineExceeded)
		<-started
		require.Error(t, <-ended, "the owner's handler saw the timeout")
	})
}

// TestHandlerClosedIsSessionLost: a closed Router answers every request
// with a retryable session-lost refusal that never names its own node, and
// a Client sends the request to the node that serves the key.
func TestHandlerClosedIsSessionLost(t *testing.T) {
	etcd := cluster.New(t, 1)
	f := newFleet(t, etcd, "closedrouter", fleetOptions{})
	a := f.start("a")
	f.start("b")
	f.waitStable()
	key := keyOwnedBy(t, a, "closed")
	a.router.Close()
	resp, err := newHTTPClient(t).Get("http://" + a.addr + "/k/" + key)
	require.NoError(t, err)
	assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
	ref := readRefusal(t, resp)
	assert.Equal(t, httpfence.RefusalSessionLost, ref.Kind)
	assert.True(t, ref.Retryable())
	assert.NotEqual(t, "a", router.HintOf(ref).Owner)
	assert.ErrorIs(t, a.router.Do(context.Background(), key, func(context.Context, fence.Token) error { return nil }), router.ErrClosed)
}
