package memetcd_test

import (
	"context"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/tenure-go/tenure/sim/memetcd"
)

// OnCommit sees every revision in order, a write whose response was lost
// included, with the server clock's time.
func TestOnCommit(t *testing.T) {
	fc := clockwork.NewFakeClock()
	srv, err := memetcd.New(memetcd.Config{Clock: fc})
	require.NoError(t, err)
	defer srv.Close()
	type seen struct {
		rev  int64
		key  string
		at   time.Time
		kind mvccpb.Event_EventType
	}
	var got []seen
	srv.OnCommit(func(at time.Time, evs []*mvccpb.Event) {
		for _, ev := range evs {
			got = append(got, seen{ev.Kv.ModRevision, string(ev.Kv.Key), at, ev.Type})
		}
	})
	cli := srv.NewClient()
	defer cli.Close()
	ctx := context.Background()
	_, err = cli.Put(ctx, "a", "1")
	require.NoError(t, err)
	fc.Advance(time.Second)
	srv.LoseResponses(cli.ID(), 1)
	_, err = cli.Put(ctx, "b", "2")
	require.Error(t, err, "the response was lost")
	_, err = cli.Delete(ctx, "a")
	require.NoError(t, err)
	srv.OnCommit(nil)
	_, err = cli.Put(ctx, "c", "3")
	require.NoError(t, err)

	t0 := fc.Now().Add(-time.Second)
	assert.Equal(t, []seen{
		{2, "a", t0, mvccpb.PUT},
		{3, "b", t0.Add(time.Second), mvccpb.PUT},
		{4, "a", t0.Add(time.Second), mvccpb.DELETE},
	}, got)
}
