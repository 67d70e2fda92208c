package fleetview

import (
	"cmp"
	"context"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/internal/clock"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/cluster"
)

// follow runs r.Follow after revision rev until the test ends and returns
// the channel of its updates once its watches are created.
func follow(t *testing.T, r *Reader, rev int64) <-chan Update {
	t.Helper()
	updates, _ := followStarts(t, r, rev)
	return updates
}

// followStarts is follow that also returns a channel that receives the
// revision each later start of the watches starts after.
func followStarts(t *testing.T, r *Reader, rev int64) (<-chan Update, <-chan int64) {
	t.Helper()
	started := make(chan int64, 1)
	r.watching = func(start int64) {
		select {
		case started <- start:
		default:
		}
	}
	updates := make(chan Update, 64)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		r.Follow(ctx, rev, 0, func(u Update) bool {
			select {
			case updates <- u:
				return true
			case <-ctx.Done():
				return false
			}
		})
	}()
	t.Cleanup(func() { stop(); <-done })
	select {
	case <-started:
	case <-time.After(20 * time.Second):
		t.Fatal("the watches did not start")
	}
	return updates, started
}

// TestFleetReaderDecodingRules holds the listing and the watch to the one
// set of decoding rules every reader of the fleet follows: a member key
// whose ID is not a valid node ID is ignored, an undecodable member value is
// kept with an empty address, a claim outside [0, P) is counted and never
// applied, and a key that is no claim key is ignored.
func TestFleetReaderDecodingRules(t *testing.T) {
	layout := keys.New("decode")
	cli := cluster.New(t, 1).NewClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	put := func(k, v string) int64 {
		t.Helper()
		resp, err := cli.Put(ctx, k, v)
		require.NoError(t, err)
		return resp.Header.Revision
	}
	aVal, err := keys.EncodeMember(keys.Member{ID: "a", Addr: "a:1", Meta: map[string]string{"zone": "z1"}})
	require.NoError(t, err)
	put(layout.Member("a"), aVal)
	put(layout.Member("b"), "not json")
	put(layout.Member("bad id"), aVal)
	epoch0 := put(layout.Claim(0), "a")
	epoch3 := put(layout.Claim(3), "b")
	put(layout.Claim(8), "a")      // outside [0, 4)
	put(layout.Claims()+"x", "a")  // not a claim key
	put(layout.Claims()+"01", "a") // not a canonical claim key
	r := &Reader{KV: cli, Watcher: cli, Layout: layout, Partitions: 4, Log: hclog.NewNullLogger(), Clock: clock.Real()}

	lst, err := r.List(ctx)
	require.NoError(t, err)
	assert.Equal(t, map[string]MemberRec{
		"a": {Member: Member{ID: "a", Addr: "a:1", Meta: map[string]string{"zone": "z1"}, Weight: 1}},
		"b": {Member: Member{ID: "b", Weight: 1}},
	}, lst.Members)
	assert.Equal(t, []Claim{{Owner: "a", Epoch: epoch0}, {}, {}, {Owner: "b", Epoch: epoch3}}, lst.Claims)
	assert.Equal(t, 1, lst.Outside)

	// The watch decodes by the same rules; each of its two watches (members,
	// claims) delivers in revision order.
	updates := follow(t, r, lst.Rev)
	put(layout.Member("bad id 2"), aVal)
	epoch9 := put(layout.Claim(9), "a")
	_, err = cli.Delete(ctx, layout.Claim(0))
	require.NoError(t, err)
	put(layout.Member("c"), "not json")
	last := put(layout.Claim(2), "c")

	var got []Event
	for len(got) < 4 {
		select {
		case u := <-updates:
			require.False(t, u.Stale, "the watch must not fail")
			got = append(got, u.Events...)
		case <-ctx.Done():
			t.Fatalf("events up to revision %d not delivered; got %+v", last, got)
		}
	}
	slices.SortFunc(got, func(a, b Event) int { return cmp.Compare(a.Rev, b.Rev) })
	require.Len(t, got, 4, "%+v", got)
	// A claim beyond the fleet's partition numbers is decoded (a resize
	// of the partition count may make it one) and the State ignores it.
	assert.Equal(t, Event{Rev: epoch9, Put: true, P: 9, Claim: Claim{Owner: "a", Epoch: epoch9}}, got[0])
	assert.Equal(t, Event{Rev: got[1].Rev, P: 0}, got[1], "claim 0 deleted")
	assert.Equal(t, Event{Rev: got[2].Rev, Member: true, Put: true, ID: "c", Rec: MemberRec{Member: Member{ID: "c", Weight: 1}}}, got[2])
	assert.Equal(t, Event{Rev: last, Put: true, P: 2, Claim: Claim{Owner: "c", Epoch: last}}, got[3])
	f := NewState(ring.Config{Partitions: 4, LoadFactor: 1.25}, hclog.NewNullLogger())
	f.Apply(Update{Listing: lst})
	f.Apply(Update{Rev: last, Events: got})
	assert.Equal(t, []Claim{{}, {}, {Owner: "c", Epoch: last}, {Owner: "b", Epoch: epoch3}}, f.Claims, "claim 9 ignored")
}

// TestFleetReaderResyncsAfterCompaction: a watch that cannot resume, after
// its connection to etcd broke, because etcd compacted past its revision
// ends; the reader says so (stale), reads everything again, delivers the
// new listing (a resync, not a catch-up) and goes on watching from there.
// The Node's event loop and the Observer both consume this.
func TestFleetReaderResyncsAfterCompaction(t *testing.T) {
	layout := keys.New("resync")
	etcd := cluster.New(t, 1)
	cli := etcd.NewClient(t)
	faulty, fp := etcd.NewFaultyClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r := &Reader{KV: faulty, Watcher: faulty, Layout: layout, Partitions: 4, Log: hclog.NewNullLogger(), Clock: clock.Real()}
	old, err := r.List(ctx)
	require.NoError(t, err)
	updates, started := followStarts(t, r, old.Rev)

	fp.Blackhole()
	_, err = cli.Put(ctx, layout.Member("a"), "not json")
	require.NoError(t, err)
	resp, err := cli.Put(ctx, layout.Claim(1), "a")
	require.NoError(t, err)
	_, err = cli.Compact(ctx, resp.Header.Revision)
	require.NoError(t, err)
	fp.DropConnections()
	fp.Heal()

	next := func() Update {
		t.Helper()
		select {
		case u := <-updates:
			return u
		case <-ctx.Done():
			t.Fatal("no update")
			return Update{}
		}
	}
	require.True(t, next().Stale, "the watch resumed from a compacted revision ends")
	u := next()
	require.NotNil(t, u.Listing, "a new listing follows")
	assert.False(t, u.CatchUp, "a resync")
	assert.Equal(t, resp.Header.Revision, u.Listing.Rev)
	assert.Contains(t, u.Listing.Members, "a")
	assert.Equal(t, Claim{Owner: "a", Epoch: resp.Header.Revision}, u.Listing.Claims[1])

	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the watches did not start again")
	}
	del, err := cli.Delete(ctx, layout.Claim(1))
	require.NoError(t, err)
	u = next()
	require.Len(t, u.Events, 1, "watching goes on after the listing")
	assert.Equal(t, Event{Rev: del.Header.Revision, P: 1}, u.Events[0])
}

// TestFleetReaderPlacements: weights and placements are read by the same
// rules in a listing and a watch: a weight out of range counts as 1, a
// placement that is undecodable, of an unknown origin, on an invalid node
// ID or outside [0, P) is ignored, and a watched placement that becomes
// unreadable counts as deleted, so the ring decides its partition.
func TestFleetReaderPlacements(t *testing.T) {
	layout := keys.New("placements")
	cli := cluster.New(t, 1).NewClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	put := func(k, v string) int64 {
		t.Helper()
		resp, err := cli.Put(ctx, k, v)
		require.NoError(t, err)
		return resp.Header.Revision
	}
	for id, w := range map[string]int{"a": 2, "b": 0, "c": 1000} {
		v, err := keys.EncodeMember(keys.Member{ID: id, Weight: w})
		require.NoError(t, err)
		put(layout.Member(id), v)
	}
	pin := keys.Placement{Node: "a", Origin: keys.OriginPin, By: "op", Reason: "test"}
	rev1 := put(layout.Placement(1), keys.EncodePlacement(pin))
	put(layout.Placement(2), `{"node":"a","origin":"guess"}`)
	put(layout.Placement(3), `{"node":"bad id","origin":"pin"}`)
	put(layout.Placement(4), keys.EncodePlacement(pin)) // outside [0, 4)
	put(layout.Placement(0), "not json")

	r := &Reader{KV: cli, Watcher: cli, Layout: layout, Partitions: 4, Log: hclog.NewNullLogger(), Clock: clock.Real()}
	lst, err := r.List(ctx)
	require.NoError(t, err)
	assert.Equal(t, 2, lst.Members["a"].Member.Weight)
	assert.Equal(t, 1, lst.Members["b"].Member.Weight)
	assert.Equal(t, 1, lst.Members["c"].Member.Weight, "out of range")
	assert.Equal(t, map[int]Placement{1: {Placement: pin, ModRev: rev1}}, lst.Placements)

	updates := follow(t, r, lst.Rev)
	move := keys.Placement{Node: "b", Origin: keys.OriginBalance, Rev: 7}
	rev2 := put(layout.Placement(2), keys.EncodePlacement(move))
	put(layout.Placement(1), `{"node":"a","origin":"guess"}`)
	del, err := cli.Delete(ctx, layout.Placement(2))
	require.NoError(t, err)
	var got []Event
	for len(got) < 3 {
		select {
		case u := <-updates:
			require.False(t, u.Stale)
			got = append(got, u.Events...)
		case <-ctx.Done():
			t.Fatalf("events not delivered; got %+v", got)
		}
	}
	assert.Equal(t, []Event{
		{Rev: rev2, Place: true, Put: true, P: 2, Placement: Placement{Placement: move, ModRev: rev2}},
		{Rev: rev2 + 1, Place: true, P: 1},
		{Rev: del.Header.Revision, Place: true, P: 2},
	}, got)

	f := NewState(ring.Config{Partitions: 4, LoadFactor: 1.25, Algorithm: ring.AlgorithmWeighted}, hclog.NewNullLogger())
	f.Apply(Update{Listing: lst})
	assert.Equal(t, []int{2, 1, 1}, f.Weights)
	o1, _ := f.Ring.Owner(1)
	assert.Equal(t, "a", o1)
	for _, u := range got {
		f.Apply(Update{Rev: u.Rev, Events: []Event{u}})
	}
	assert.Empty(t, f.Placements)
	assert.Equal(t, f.Base.Version(), f.Ring.Version())
}
