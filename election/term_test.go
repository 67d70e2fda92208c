package election_test

import (
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestConcurrentResign: Resign from many goroutines at once, racing a new
// Campaign of the same Election, deletes the key once and never a later
// term's key.
func TestConcurrentResign(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	ctx := testCtx(t)
	e := newElection(t, newSession(t, cli, shortTTL), cli, "concurrent", "n1")
	term, err := e.Campaign(ctx)
	require.NoError(t, err)

	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() { errs <- term.Resign(ctx) })
	}
	var next *election.Term
	wg.Go(func() {
		var err error
		for {
			next, err = e.Campaign(ctx)
			if err == nil {
				return
			}
			if !assert.ErrorIs(t, err, election.ErrAlreadyCampaigning) {
				return
			}
		}
	})
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
	require.NotNil(t, next)
	assert.Greater(t, next.Token().Epoch, term.Token().Epoch)
	assert.ErrorIs(t, term.Err(), election.ErrResigned)
	require.NoError(t, next.Err(), "a late resign of the old term must not end the new one")
	got, err := cli.Get(ctx, e.Prefix(), clientv3.WithPrefix())
	require.NoError(t, err)
	require.Len(t, got.Kvs, 1)
	assert.Equal(t, next.Token().Epoch, got.Kvs[0].CreateRevision)
	require.NoError(t, next.Resign(ctx))
}
