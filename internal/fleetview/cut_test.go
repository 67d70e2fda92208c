package fleetview

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/clock"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/sim/cluster"
)

// fleetModel is what a reader knows of the four watched key sets, built
// from nothing but the events it was delivered.
type fleetModel struct {
	members    map[string]string // ID -> address
	drained    map[string]bool
	claims     map[int]string // partition -> owner@epoch
	placements map[int]string // partition -> node
}

func newFleetModel() *fleetModel {
	return &fleetModel{members: map[string]string{}, drained: map[string]bool{}, claims: map[int]string{}, placements: map[int]string{}}
}

func (m *fleetModel) apply(e Event) {
	switch {
	case e.Member && e.Put:
		m.members[e.ID] = e.Rec.Member.Addr
	case e.Member:
		delete(m.members, e.ID)
	case e.Drain && e.Put:
		m.drained[e.ID] = true
	case e.Drain:
		delete(m.drained, e.ID)
	case e.Place && e.Put:
		m.placements[e.P] = e.Placement.Node
	case e.Place:
		delete(m.placements, e.P)
	case e.Spec:
	case e.Put:
		m.claims[e.P] = fmt.Sprintf("%s@%d", e.Claim.Owner, e.Claim.Epoch)
	default:
		delete(m.claims, e.P)
	}
}

// modelOf is the model of a listing.
func modelOf(lst *Listing) *fleetModel {
	m := newFleetModel()
	for id, rec := range lst.Members {
		m.members[id] = rec.Member.Addr
	}
	for id := range lst.Drained {
		m.drained[id] = true
	}
	for p, c := range lst.Claims {
		if c.Epoch != 0 {
			m.claims[p] = fmt.Sprintf("%s@%d", c.Owner, c.Epoch)
		}
	}
	for p, pl := range lst.Placements {
		m.placements[p] = pl.Node
	}
	return m
}

// TestFollowDeliversConsistentCuts holds Follow to consistent cuts: after
// every update, what the reader was delivered is exactly what etcd held at
// the revision the update reports, while members, drain marks, claims and
// placements change in an interleaved stream of writes (some of one key,
// some of two key sets in one transaction), beside writes of keys the
// reader ignores inside the range it watches (fence floors, load
// reports). A reader that delivered each key set's events on a watch of
// its own as they came would report a revision whose changes on another
// watch it had not yet seen.
func TestFollowDeliversConsistentCuts(t *testing.T) {
	layout := keys.New("cut")
	cli := cluster.New(t, 1).NewClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r := &Reader{KV: cli, Watcher: cli, Layout: layout, Partitions: 8, Log: hclog.NewNullLogger(), Clock: clock.Real()}
	lst, err := r.List(ctx)
	require.NoError(t, err)
	updates := follow(t, r, lst.Rev)

	const writes = 400
	rng := rand.New(rand.NewPCG(1, 2))
	ops := func() clientv3.Op {
		id := fmt.Sprintf("n%d", rng.IntN(4))
		p := rng.IntN(8)
		del := rng.IntN(4) == 0
		switch rng.IntN(5) {
		case 4: // keys of the fleet's inside the watched range that no reader uses
			if rng.IntN(2) == 0 {
				return clientv3.OpPut(layout.Fences()+fmt.Sprintf("p/%d", p), "x")
			}
			return clientv3.OpPut(layout.Load(id), "{}")
		case 0:
			if del {
				return clientv3.OpDelete(layout.Member(id))
			}
			v, err := keys.EncodeMember(keys.Member{ID: id, Addr: fmt.Sprintf("%s:%d", id, rng.IntN(1000))})
			require.NoError(t, err)
			return clientv3.OpPut(layout.Member(id), v)
		case 1:
			if del {
				return clientv3.OpDelete(layout.Drained(id))
			}
			return clientv3.OpPut(layout.Drained(id), "")
		case 2:
			if del {
				return clientv3.OpDelete(layout.Claim(p))
			}
			return clientv3.OpPut(layout.Claim(p), id)
		default:
			if del {
				return clientv3.OpDelete(layout.Placement(p))
			}
			return clientv3.OpPut(layout.Placement(p), keys.EncodePlacement(keys.Placement{Node: id, Origin: keys.OriginPin}))
		}
	}
	var last int64
	final := make(chan int64, 1) // the revision of the last write
	go func() {
		var rev int64
		defer func() { final <- rev }()
		for range writes {
			txn := []clientv3.Op{ops()}
			if rng.IntN(3) == 0 { // two key sets at one revision
				if second := ops(); string(second.KeyBytes()) != string(txn[0].KeyBytes()) {
					txn = append(txn, second)
				}
			}
			resp, err := cli.Txn(ctx).Then(txn...).Commit()
			if err != nil {
				return
			}
			rev = resp.Header.Revision
		}
		// The last write is the fleet's, so the reader reaches its revision.
		v, err := keys.EncodeMember(keys.Member{ID: "last", Addr: "last:1"})
		if err != nil {
			return
		}
		if resp, err := cli.Put(ctx, layout.Member("last"), v); err == nil {
			rev = resp.Header.Revision
		}
	}()

	model := modelOf(lst)
	checked, end := 0, int64(-1)
	for end < 0 || last < end {
		var u Update
		select {
		case end = <-final:
			continue
		case u = <-updates:
		case <-ctx.Done():
			t.Fatalf("the reader reached revision %d of %d", last, end)
		}
		require.Nil(t, u.Listing, "no watch failed, so no listing")
		require.False(t, u.Stale)
		for i, e := range u.Events {
			require.LessOrEqual(t, e.Rev, u.Rev, "an event above the update's revision")
			if i > 0 {
				require.LessOrEqual(t, u.Events[i-1].Rev, e.Rev, "events out of revision order")
			}
			model.apply(e)
		}
		last = u.Rev
		at, err := r.listAt(ctx, u.Rev)
		require.NoError(t, err)
		want := modelOf(at)
		assert.Equal(t, want, model, "what the reader holds at revision %d", u.Rev)
		if t.Failed() {
			return
		}
		checked++
	}
	require.Greater(t, checked, writes/8, "updates checked")
}

// listAt reads the members, drain marks, claims and placements at revision
// rev, as List reads them at the current one.
func (r *Reader) listAt(ctx context.Context, rev int64) (*Listing, error) {
	resp, err := r.KV.Txn(ctx).Then(
		clientv3.OpGet(r.Layout.Members(), clientv3.WithPrefix(), clientv3.WithRev(rev)),
		clientv3.OpGet(r.Layout.Claims(), clientv3.WithPrefix(), clientv3.WithRev(rev)),
		clientv3.OpGet(r.Layout.DrainedPrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithRev(rev)),
		clientv3.OpGet(r.Layout.Placements(), clientv3.WithPrefix(), clientv3.WithRev(rev)),
	).Commit()
	if err != nil {
		return nil, err
	}
	kvs := func(i int) []*mvccpb.KeyValue { return resp.Responses[i].GetResponseRange().GetKvs() }
	return r.Decode(rev, kvs(0), kvs(1), kvs(2), kvs(3), nil), nil
}
