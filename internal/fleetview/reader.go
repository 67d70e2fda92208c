package fleetview

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jonboulle/clockwork"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/clock"
	"github.com/tenure-go/tenure/internal/etcderr"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/internal/retry"
)

// Reader is the one reader of a cluster's members, drain marks, claims,
// placements and spec in etcd, shared by the Node's event loop and the
// Observer of callers outside the fleet. It reads them at one revision (a
// listing), watches them from the next revision on one watch (every update
// a consistent cut), reads them again when the watch fails (compaction, lost leader, closed channel), and decodes every
// key-value by one set of rules: a member or drain key whose ID is not a
// valid node ID is ignored (so that every reader computes the same ring), a
// member value that cannot be decoded is kept with an empty address, a
// drain mark counts whatever its value, a claim value is decoded by
// keys.DecodeClaim (both of its forms), and a claim outside [0, P) is
// counted and logged once, never applied.
//
// It reads etcd only through clientv3.KV and clientv3.Watcher. It is safe
// for concurrent use; Follow runs on the consumer's goroutine of choice.
type Reader struct {
	KV         clientv3.KV
	Watcher    clientv3.Watcher // unused by List and Decode
	Layout     keys.Layout
	Partitions int
	Log        hclog.Logger
	Clock      clockwork.Clock // times Follow's retries and redials

	warned atomic.Bool // a claim outside [0, P) has been logged

	// watching, if set, is called when Follow's watches are created, with
	// the revision they start after (tests wait on it).
	watching func(start int64)
}

// Member is a node registered in the cluster, as published in its member
// key. Its fields are fleet.Member's, which package ownership converts it
// to.
type Member struct {
	// ID is the node ID.
	ID string
	// Addr is the node's advertised address, possibly empty.
	Addr string
	// Meta is the node's published metadata, possibly nil.
	Meta map[string]string
	// Weight is the node's published capacity weight, in [1,
	// ring.MaxWeight]: 1 if it published none or one out of range.
	Weight int
	// Prepares says that the node prepares the partitions planned moves
	// give it, and says so in its readiness keys (a warm handoff).
	Prepares bool
	// Build is the node's build, "" if it published none; Features the
	// protocol features it understands, none for a build that publishes
	// none (the base protocol).
	Build    string
	Features []string
}

// MemberRec is a decoded member key: the member and the lease it is bound
// to, with the lease's TTL as the member published it (0: unknown).
type MemberRec struct {
	Member Member
	Lease  clientv3.LeaseID
	TTL    time.Duration
}

// Claim is a decoded claim key; the zero Claim is no claim.
type Claim struct {
	Owner string
	Epoch int64 // keys.ClaimEpoch; 0 when there is no claim
	Lease clientv3.LeaseID
	Since time.Time // when the owner created it, by its clock; zero if unknown
}

// Placement is a decoded placement key: partition's pin or move.
type Placement struct {
	keys.Placement
	// ModRev is the revision the entry was last written at.
	ModRev int64
}

// Listing is the members, drain marks, claims and placements read at one
// revision.
type Listing struct {
	Rev        int64
	Members    map[string]MemberRec
	Drained    map[string]bool // IDs of the drained nodes
	Claims     []Claim         // by partition
	Outside    int             // claim keys of partitions outside [0, P)
	Placements map[int]Placement
	Spec       Spec // the fleet's spec; ModRev 0 if not read or undecodable
	// Shape is the fleet's partitioning at Rev: the spec's count and the
	// resize in progress.
	Shape *Shape
}

// Event is one decoded change of a member, drain or claim key.
type Event struct {
	Rev    int64 // the change's revision
	Member bool  // a member key
	Drain  bool  // a drain mark
	Place  bool  // a placement
	Spec   bool  // the spec (none of the four: a claim key)
	Put    bool  // put (else delete)

	ID  string    // member or drain mark: the node ID
	Rec MemberRec // member put: the member

	P     int   // claim or placement: the partition
	Claim Claim // claim put: the claim

	Placement Placement // placement put: the placement

	SpecRec Spec // spec put: the spec
	// Resize is set for a resize key (under the claim prefix; see
	// keys.Resizes).
	Resize *ResizeEvent
}

// ResizeEvent is a change of a resize key: the key, and for its record
// the record put or, for a delete, the record deleted (nil if etcd did not
// return it).
type ResizeEvent struct {
	Key    keys.ResizeKey
	Record *keys.Resize
}

// Update is one delivery of Reader.Follow: the watch ended (Stale; a
// listing follows), a new Listing that replaces everything known, or a
// batch of Events in revision order.
type Update struct {
	Stale   bool
	Listing *Listing
	// CatchUp marks a Listing read when the watch started later than
	// the revision followed: it covers what changed in between, and is no
	// resync (no watch failed).
	CatchUp bool
	Rev     int64 // events: the revision of the last, a consistent cut (see watch)
	Events  []Event
}

// List reads the members, drain marks and claims at one revision.
func (r *Reader) List(ctx context.Context) (*Listing, error) {
	resp, err := r.KV.Txn(ctx).Then(
		clientv3.OpGet(r.Layout.Members(), clientv3.WithPrefix()),
		clientv3.OpGet(r.Layout.Claims(), clientv3.WithPrefix()),
		clientv3.OpGet(r.Layout.DrainedPrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly()),
		clientv3.OpGet(r.Layout.Placements(), clientv3.WithPrefix()),
		clientv3.OpGet(r.Layout.Spec()),
	).Commit()
	if err != nil {
		return nil, fmt.Errorf("fleet: read members and claims: %w", err)
	}
	if len(resp.Responses) != 5 {
		return nil, fmt.Errorf("fleet: read members and claims: %d responses for 5 reads", len(resp.Responses))
	}
	var spec *mvccpb.KeyValue
	if kvs := resp.Responses[4].GetResponseRange().GetKvs(); len(kvs) > 0 {
		spec = kvs[0]
	}
	lst := r.Decode(resp.Header.Revision,
		resp.Responses[0].GetResponseRange().GetKvs(),
		resp.Responses[1].GetResponseRange().GetKvs(),
		resp.Responses[2].GetResponseRange().GetKvs(),
		resp.Responses[3].GetResponseRange().GetKvs(), spec)
	if spec != nil {
		lst.Spec, _ = r.spec(spec)
	}
	return lst, nil
}

// Decode decodes the member, claim (with the resize keys among them),
// drain and placement key-values and the spec (nil if absent) read at
// revision rev.
func (r *Reader) Decode(rev int64, members, claims, drained, placements []*mvccpb.KeyValue, spec *mvccpb.KeyValue) *Listing {
	shape := r.shape(spec, claims)
	lst := &Listing{Rev: rev, Members: make(map[string]MemberRec), Drained: make(map[string]bool), Claims: make([]Claim, shape.Max()),
		Placements: make(map[int]Placement), Shape: shape}
	for _, kv := range drained {
		if id, ok := r.DrainedID(kv.Key); ok {
			lst.Drained[id] = true
		}
	}
	for _, kv := range members {
		if id, rec, ok := r.member(kv); ok {
			lst.Members[id] = rec
		}
	}
	for _, kv := range claims {
		p, ok := r.partition(kv.Key)
		switch {
		case ok && p < len(lst.Claims):
			lst.Claims[p] = ClaimOf(kv)
		case p >= 0:
			lst.Outside++
		}
	}
	for _, kv := range placements {
		if p, pl, ok := r.placement(kv); ok && p < shape.Max() {
			lst.Placements[p] = pl
		}
	}
	return lst
}

// RedialEvery is how often a reader whose etcd connection is down asks
// its client to reconnect (see Follow), and how often a Node retries a
// rejoin.
const RedialEvery = retry.RejoinMax

// errWatchEnded reports a watch channel that closed or was cancelled.
var errWatchEnded = errors.New("fleet: watch ended")

// Follow watches the members, drain marks, claims, placements and spec
// after revision rev on one watch and hands every change to deliver, in
// revision order, each update a consistent cut (see watch), until ctx
// ends or deliver returns false. It starts its watch at etcd's current
// revision, where etcd sends events as they are written, rather than at
// rev+1, which etcd serves from its history in passes 100ms apart once the
// fleet has moved past rev; when the watch starts past rev it reads
// everything once more (a catch-up listing, Update.CatchUp) and delivers
// only the events after it. When the watch fails it delivers a stale update, reads everything again
// (each attempt bounded by timeout, if positive; failures retried with
// backoff) and delivers the new listing before it watches again. While it
// follows, it keeps the etcd client from waiting out gRPC's reconnect
// backoff (redial).
func (r *Reader) Follow(ctx context.Context, rev int64, timeout time.Duration, deliver func(Update) bool) {
	rctx, stopRedial := context.WithCancel(ctx)
	redialed := make(chan struct{})
	go func() {
		defer close(redialed)
		r.redial(rctx)
	}()
	defer func() {
		stopRedial()
		<-redialed
	}()
	for {
		err := r.watch(ctx, rev, timeout, deliver)
		if ctx.Err() != nil || errors.Is(err, errStopped) {
			return
		}
		r.Log.Debug("watch ended; reading members and claims again", "error", err)
		if !deliver(Update{Stale: true}) {
			return
		}
		lst := r.relist(ctx, timeout)
		if lst == nil || !deliver(Update{Listing: lst}) {
			return
		}
		rev = lst.Rev
	}
}

// redial asks the etcd client to reconnect at once (etcderr.Redial) every
// RedialEvery while its connection is down, until ctx ends. A watch whose
// connection is lost does not fail: the client reopens it once the
// connection is back, and a read waits for the connection too, so that
// without redial a reader would see etcd again only when gRPC's reconnect
// backoff, which grows to minutes, next lets it try. It returns at once
// for a client that has no gRPC connection to watch.
func (r *Reader) redial(ctx context.Context) {
	for etcderr.WaitDown(ctx, r.Watcher) {
		etcderr.Redial(r.Watcher)
		if !clock.Sleep(ctx, r.Clock, RedialEvery) {
			return
		}
	}
}

// relist reads the members and claims until it succeeds, retrying on the
// retry.Node policy; nil if ctx ended first.
func (r *Reader) relist(ctx context.Context, timeout time.Duration) *Listing {
	var lst *Listing
	_ = retry.Do(ctx, r.Clock, retry.Node(), func(attempt int) (bool, error) {
		lctx, cancel := ctx, context.CancelFunc(func() {})
		if timeout > 0 {
			lctx, cancel = clock.WithTimeout(ctx, r.Clock, timeout)
		}
		l, err := r.List(lctx)
		cancel()
		if err == nil {
			lst = l
			return true, nil
		}
		if ctx.Err() == nil {
			r.Log.Warn("read members and claims", "error", err, "attempt", attempt)
		}
		return false, err
	})
	return lst
}
