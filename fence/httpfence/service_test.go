package httpfence_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/fence/httpfence"
	"github.com/tenure-go/tenure/fence/internal/fencetest"
	"github.com/tenure-go/tenure/sim/cluster"
)

// backend is the store behind a test service: its writes are fenced, and
// each returns its position in the store's own commit order.
type backend interface {
	fence.Fencer
	write(ctx context.Context, t fence.Token, key, value string) (int64, error)
	read(ctx context.Context, key string) (string, bool)
}

// gateBackend is state in memory behind a fence.Gate.
type gateBackend struct {
	gate fence.Gate
	mu   sync.Mutex
	kv   map[string]string
	seq  int64
}

func (b *gateBackend) Advance(ctx context.Context, t fence.Token) error {
	return b.gate.Advance(ctx, t)
}

func (b *gateBackend) write(_ context.Context, t fence.Token, key, value string) (int64, error) {
	var seq int64
	err := b.gate.Do(t, func() error {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.kv == nil {
			b.kv = map[string]string{}
		}
		b.kv[key] = value
		b.seq++
		seq = b.seq
		return nil
	})
	return seq, err
}

func (b *gateBackend) read(_ context.Context, key string) (string, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	v, ok := b.kv[key]
	return v, ok
}

// etcdBackend is an etcdfence.Store: commit order is the etcd revision.
type etcdBackend struct{ *etcdfence.Store }

func (b etcdBackend) write(ctx context.Context, t fence.Token, key, value string) (int64, error) {
	return b.Put(ctx, t, key, []byte(value))
}

func (b etcdBackend) read(ctx context.Context, key string) (string, bool) {
	it, err := b.Get(ctx, fence.Token{Scope: "reader", Epoch: 1}, key)
	if err != nil || !it.Exists() {
		return "", false
	}
	return string(it.Value), true
}

// service is a test HTTP service: PUT /<key> writes the body under the
// request's token, fenced at the store, and answers the commit position.
// It verifies nothing (InsecureNoVerify): its tests are about fencing.
func service(t *testing.T, b backend) http.Handler {
	return middleware(t, b, writes(b))
}

// writes is the test service's handler behind the middleware.
func writes(b backend) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := fence.FromContext(r.Context())
		if !ok {
			_ = httpfence.WriteRefusal(w, httpfence.RefusalOf(fence.ErrNoToken))
			return
		}
		v, _ := io.ReadAll(r.Body)
		seq, err := b.write(r.Context(), tok, strings.TrimPrefix(r.URL.Path, "/"), string(v))
		if err != nil {
			if ref := httpfence.RefusalOf(err); ref != nil {
				_ = httpfence.WriteRefusal(w, ref)
			} else {
				http.Error(w, err.Error(), http.StatusInternalServerError)
			}
			return
		}
		_, _ = io.WriteString(w, strconv.FormatInt(seq, 10))
	})
}

func backends(t *testing.T) map[string]backend {
	c := cluster.New(t, 1)
	cfg := etcdfence.DefaultConfig()
	cfg.Prefix = "/svc/data/"
	cfg.ClusterPrefix = "/svc/"
	s, err := etcdfence.New(c.NewClient(t), cfg)
	require.NoError(t, err)
	return map[string]backend{"gate": &gateBackend{}, "etcd": etcdBackend{s}}
}

// put sends PUT /key with the token of ctx through the fencing Transport.
func put(ctx context.Context, client *http.Client, url, key, value string) (int64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url+"/"+key, strings.NewReader(value))
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if err := httpfence.ResponseError(resp); err != nil {
		return 0, err
	}
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: %s", resp.Status, b)
	}
	return strconv.ParseInt(string(b), 10, 64)
}

// TestZombie: owner A (epoch e1) is paused; owner B (e2 > e1) raises the
// floor and writes; A resumes and sends writes, to a key B never touched
// and to B's key: both answered 409 with the scope and epochs, and B's
// data is intact.
func TestZombie(t *testing.T) {
	for name, b := range backends(t) {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(service(t, b))
			defer srv.Close()
			client := &http.Client{Transport: &httpfence.Transport{Base: srv.Client().Transport, Required: true}}
			scope := fence.PartitionScope(3)
			a := fence.NewContext(context.Background(), fence.Token{Scope: scope, Epoch: 100})
			bctx := fence.NewContext(context.Background(), fence.Token{Scope: scope, Epoch: 250})
			_, err := put(a, client, srv.URL, "a-key", "written by A")
			require.NoError(t, err)

			paused, resume := make(chan struct{}), make(chan struct{})
			errs := make(chan [2]error, 1)
			go func() { // owner A
				close(paused)
				<-resume
				_, e1 := put(a, client, srv.URL, "fresh-key", "zombie")
				_, e2 := put(a, client, srv.URL, "b-key", "zombie")
				errs <- [2]error{e1, e2}
			}()
			<-paused
			require.NoError(t, b.Advance(context.Background(), fence.Token{Scope: scope, Epoch: 250}), "B advances")
			_, err = put(bctx, client, srv.URL, "b-key", "written by B")
			require.NoError(t, err)
			close(resume)

			for _, err := range <-errs {
				var se *fence.StaleError
				require.ErrorAs(t, err, &se)
				require.Equal(t, fence.StaleError{Scope: scope, Presented: 100, Current: 250}, *se)
			}
			v, _ := b.read(context.Background(), "b-key")
			require.Equal(t, "written by B", v)
			_, ok := b.read(context.Background(), "fresh-key")
			require.False(t, ok)
			v, _ = b.read(context.Background(), "a-key")
			require.Equal(t, "written by A", v)
		})
	}
}

// TestMonotonic: 32 goroutines send fenced writes with interleaved epochs
// over HTTP; in the store's own commit order, the accepted writes' epochs
// never decrease per scope, and every 2xx write is in it.
func TestMonotonic(t *testing.T) {
	cfg := fencetest.Config{Goroutines: 32, PerWriter: 20, Scopes: 3, Seed: 5}
	for name, b := range backends(t) {
		t.Run(name, func(t *testing.T) {
			srv := httptest.NewServer(service(t, b))
			defer srv.Close()
			client := &http.Client{Transport: &httpfence.Transport{Base: srv.Client().Transport}}
			accepted, refused := fencetest.Interleave(t, cfg, func(g, i int, tok fence.Token, _ string) (int64, error) {
				return put(fence.NewContext(context.Background(), tok), client, srv.URL, fmt.Sprintf("g%d/%d", g, i), "v")
			})
			fencetest.CheckOrder(t, accepted)
			t.Logf("%s: %d accepted, %d refused", name, len(accepted), refused)
		})
	}
}
