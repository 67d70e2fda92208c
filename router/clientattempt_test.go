package router_test

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
	"github.com/tenure-go/tenure/sim/fleettest"
)

// An attempt that has no answer within AttemptTimeout is cut off, and
// its error says so: errors.Is ErrAttemptTimeout (grpcroute's too) and
// context.DeadlineExceeded, naming the node, the bound and the TTL it
// comes from.
func TestClientAttemptTimeoutError(t *testing.T) {
	etcd := cluster.New(t, 1)
	cli := etcd.NewClient(t)
	ff := fleettest.NewHandmade(t, cli, "silent")
	ff.Spec(8)
	fc := clockwork.NewFakeClock()
	c := newClient(t, cli, router.ClientConfig{Cluster: "silent", Clock: fc, SessionTTL: 4 * time.Second,
		Backoff: router.Backoff{MaxAttempts: 1}})
	addr, hits := fakeNode(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	ff.Member("silent", addr)
	key := keyInPartition(c, 2)
	ff.Claim(2, "silent")
	fleettest.WaitRoute(t, c, key, addr)

	done := make(chan error, 1)
	go func() {
		_, err := getVia(context.Background(), c, key, "/k/"+key)
		done <- err
	}()
	<-hits
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, fc.BlockUntilContext(ctx, 1))
	fc.Advance(2 * time.Second) // the default bound: half the TTL
	err := <-done
	require.ErrorIs(t, err, router.ErrAttemptTimeout)
	assert.ErrorIs(t, err, router.ErrRetriesExhausted)
	assert.ErrorIs(t, err, context.DeadlineExceeded)
	assert.Contains(t, err.Error(), "router: "+addr+" did not answer within 2s (AttemptTimeout; the fleet's session TTL is 4s)")
}
