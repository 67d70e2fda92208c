package fleetview

import (
	"context"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/clock"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestFleetReaderCatchesUpAtWatchStart: a reader that follows from a
// revision the fleet has moved past (a node that listed, then watched)
// starts its watches at etcd's current revision and first delivers a
// catch-up listing that holds every change since, then the events after it.
func TestFleetReaderCatchesUpAtWatchStart(t *testing.T) {
	layout := keys.New("catchup")
	cli := cluster.New(t, 1).NewClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r := &Reader{KV: cli, Watcher: cli, Layout: layout, Partitions: 4, Log: hclog.NewNullLogger(), Clock: clock.Real()}
	_, err := cli.Put(ctx, layout.Claim(0), "a")
	require.NoError(t, err)
	old, err := r.List(ctx)
	require.NoError(t, err)
	_, err = cli.Delete(ctx, layout.Claim(0))
	require.NoError(t, err)
	_, err = cli.Put(ctx, layout.Member("b"), "not json")
	require.NoError(t, err)
	last, err := cli.Put(ctx, layout.Claim(2), "b")
	require.NoError(t, err)

	updates := follow(t, r, old.Rev)
	u := <-updates
	require.NotNil(t, u.Listing, "a catch-up listing first: %+v", u)
	assert.True(t, u.CatchUp)
	assert.GreaterOrEqual(t, u.Listing.Rev, last.Header.Revision)
	assert.Equal(t, []Claim{{}, {}, {Owner: "b", Epoch: last.Header.Revision}, {}}, u.Listing.Claims)
	assert.Contains(t, u.Listing.Members, "b")

	del, err := cli.Delete(ctx, layout.Claim(2))
	require.NoError(t, err)
	u = <-updates
	assert.Equal(t, []Event{{Rev: del.Header.Revision, P: 2}}, u.Events, "then the events after it")
}

// TestFleetReaderLosesNothingAtWatchStart follows, again and again, from a
// revision the fleet moves past while a writer keeps changing members and
// claims, so that writes land before, during and after the watches start
// (in every other round the writer has written once before the start, so
// that it catches up):
// no update holds an event at or below the catch-up listing's revision,
// each watch's events come in revision order, every write after the
// listing is delivered exactly once, and the view built from the updates
// equals a listing read once the writer stopped.
func TestFleetReaderLosesNothingAtWatchStart(t *testing.T) {
	layout := keys.New("nolost")
	cli := cluster.New(t, 1).NewClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := &Reader{KV: cli, Watcher: cli, Layout: layout, Partitions: 4, Log: hclog.NewNullLogger(), Clock: clock.Real()}
	catchUps := 0
	for round := range 8 {
		lst, err := r.List(ctx)
		require.NoError(t, err)
		f := NewState(ring.Config{Partitions: 4, LoadFactor: 1.25, Algorithm: ring.AlgorithmWeighted}, hclog.NewNullLogger())
		f.Apply(Update{Listing: lst})

		var wg sync.WaitGroup
		stop := make(chan struct{})
		lastRev := make(chan []int64, 1)
		first := make(chan struct{}) // closed after the writer's first write, or once it stops
		var firstOnce sync.Once
		wrote := func() { firstOnce.Do(func() { close(first) }) }
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer wrote()
			var written []int64
			defer func() { lastRev <- written }() // the revisions of the writer's writes
			for i := 0; ; i++ {
				var resp clientv3.OpResponse
				var err error
				switch id := "n" + strconv.Itoa(i%3); {
				case i%7 == 6:
					resp, err = cli.Do(ctx, clientv3.OpDelete(layout.Member(id)))
				case i%5 == 4:
					resp, err = cli.Do(ctx, clientv3.OpDelete(layout.Claim(i%4)))
				case i%2 == 0:
					resp, err = cli.Do(ctx, clientv3.OpPut(layout.Member(id), "not json"))
				default:
					resp, err = cli.Do(ctx, clientv3.OpPut(layout.Claim(i%4), id))
				}
				if err != nil {
					t.Error(err)
					return
				}
				if resp.Put() != nil {
					written = append(written, resp.Put().Header.Revision)
					wrote()
				} else if resp.Del().Deleted > 0 {
					written = append(written, resp.Del().Header.Revision)
					wrote()
				}
				select {
				case <-stop:
					return
				default:
				}
			}
		}()
		if round%2 == 1 {
			// The fleet moves past the listing before the watch starts:
			// its start catches up. In the other rounds the two race.
			<-first
		}
		uctx, ustop := context.WithCancel(ctx)
		updates := make(chan Update, 1024)
		done := make(chan struct{})
		go func() {
			defer close(done)
			r.Follow(uctx, lst.Rev, 0, func(u Update) bool {
				select {
				case updates <- u:
					return true
				case <-uctx.Done():
					return false
				}
			})
		}()

		var floor int64 = lst.Rev
		lastOf := map[bool]int64{} // by Member: the last event's revision of each watch
		applied := 0
		var seen, written []int64
		var sentinel map[bool]int64 // by Member: the last write to each watch's keys
		caughtUp := func() bool {
			return sentinel != nil && max(floor, lastOf[true]) >= sentinel[true] && max(floor, lastOf[false]) >= sentinel[false]
		}
		for !caughtUp() {
			select {
			case u := <-updates:
				require.False(t, u.Stale, "round %d: no watch fails", round)
				if u.Listing != nil {
					require.True(t, u.CatchUp, "round %d", round)
					require.Zero(t, applied, "round %d: a catch-up listing comes before any event", round)
					floor = u.Listing.Rev
					catchUps++
				}
				for _, e := range u.Events {
					require.Greater(t, e.Rev, floor, "round %d: an event the listing holds", round)
					require.Greater(t, e.Rev, lastOf[e.Member], "round %d: events in revision order", round)
					lastOf[e.Member] = e.Rev
					seen = append(seen, e.Rev)
					applied++
				}
				f.Apply(u)
				if applied >= 40 && sentinel == nil {
					close(stop)
					wg.Wait()
					written = <-lastRev
					m, err := cli.Put(ctx, layout.Member("zz"), "not json")
					require.NoError(t, err)
					c, err := cli.Put(ctx, layout.Claim(3), "zz")
					require.NoError(t, err)
					sentinel = map[bool]int64{true: m.Header.Revision, false: c.Header.Revision}
					written = append(written, m.Header.Revision, c.Header.Revision)
				}
			case <-ctx.Done():
				t.Fatalf("round %d: view at revision %d, sentinels %v", round, f.Rev, sentinel)
			}
		}
		ustop()
		<-done
		slices.Sort(seen)
		written = slices.DeleteFunc(written, func(rev int64) bool { return rev <= floor })
		require.Equal(t, written, seen, "round %d: every write after the listing is delivered once", round)
		want, err := r.List(ctx)
		require.NoError(t, err)
		require.Equal(t, sentinel[false], want.Rev, "round %d: only the writer writes", round)
		assert.Equal(t, want.Claims, f.Claims, "round %d", round)
		assert.Equal(t, want.Members, f.Members, "round %d", round)
	}
	assert.Positive(t, catchUps, "the fleet moved past the listing before the watches started")
}
