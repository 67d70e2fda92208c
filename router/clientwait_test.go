package router_test

import (
	"context"
	"io"
	"net/http"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence/httpfence"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
	"github.com/tenure-go/tenure/sim/fleettest"
)

// TestClientRetriesAtOnceOnNews: on a clock that never moves (every
// backoff delay would last forever), a retry still goes out when the
// refusal's hint names a newer claim, or the next owner of the claim that
// ended, and when the Client's view of the partition changes while it
// waits; each call ends with its answer, two attempts sent.
func TestClientRetriesAtOnceOnNews(t *testing.T) {
	etcd := cluster.New(t, 1)
	cli := etcd.NewClient(t)
	ff := fleettest.NewHandmade(t, cli, "news")
	const P = 8
	ff.Spec(P)
	frozen := clockwork.NewFakeClock()
	c := newClient(t, cli, router.ClientConfig{Cluster: "news", Clock: frozen, AttemptTimeout: -1,
		Backoff: router.Backoff{MaxAttempts: 5, Initial: time.Hour, Max: time.Hour}})
	okAddr, okHits := fakeNode(t, func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "done") })
	ff.Member("ok", okAddr)

	// call sends a GET for key and returns its body; it fails the test if
	// the call has not ended within ten seconds (it is waiting on the
	// frozen clock).
	call := func(t *testing.T, key string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		before := c.Stats()
		resp, err := getVia(ctx, c, key, "/k/"+key)
		require.NoError(t, err, "the retry waited a backoff delay")
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		after := c.Stats()
		assert.Equal(t, before.Attempts+2, after.Attempts)
		assert.Equal(t, before.Retries+1, after.Retries)
		return string(body)
	}

	for i, tc := range []struct {
		name  string
		epoch func(current int64) int64 // the hint's epoch, given the refused claim's
	}{
		{"hint names a newer claim", func(current int64) int64 { return current + 1000 }},
		{"hint names the next owner of the claim that ended", func(int64) int64 { return 0 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := i
			var epoch atomic.Int64
			oldAddr, oldHits := fakeNode(t, func(w http.ResponseWriter, r *http.Request) {
				_ = httpfence.WriteRefusal(w, router.WithHint(&httpfence.Refusal{Kind: httpfence.RefusalNotOwner},
					fleet.Route{Partition: p, Owner: "ok", Addr: okAddr, Epoch: tc.epoch(epoch.Load())}))
			})
			old := "old" + strconv.Itoa(i)
			ff.Member(old, oldAddr)
			key := keyInPartition(c, p)
			epoch.Store(ff.Claim(p, old))
			fleettest.WaitRoute(t, c, key, oldAddr)
			assert.Equal(t, "done", call(t, key))
			<-oldHits
			<-okHits
		})
	}

	t.Run("the view changes while the call waits", func(t *testing.T) {
		const p = 2
		var (
			epoch atomic.Int64
			self  atomic.Pointer[string]
		)
		// The holder refuses with a hint that is no news: itself, at its
		// own epoch (a handoff in progress).
		busyAddr, busyHits := fakeNode(t, func(w http.ResponseWriter, r *http.Request) {
			_ = httpfence.WriteRefusal(w, router.WithHint(&httpfence.Refusal{Kind: httpfence.RefusalHandoff},
				fleet.Route{Partition: p, Owner: "busy", Addr: *self.Load(), Epoch: epoch.Load()}))
		})
		self.Store(&busyAddr)
		ff.Member("busy", busyAddr)
		key := keyInPartition(c, p)
		epoch.Store(ff.Claim(p, "busy"))
		fleettest.WaitRoute(t, c, key, busyAddr)
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			resp, err := getVia(ctx, c, key, "/k/"+key)
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		<-busyHits // refused: the call waits, on the frozen clock
		ff.Claim(p, "ok")
		require.NoError(t, <-done, "the call did not follow the new claim at once")
		<-okHits
	})
}
