package ownership

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/clock"
	"github.com/tenure-go/tenure/internal/etcderr"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/internal/watchstream"
)

// fleetReader is the one reader of a cluster's members, drain marks and
// claims in etcd, shared by the Node's event loop and the Observer of
// callers outside the fleet. It reads all three at one revision (a
// listing), watches them from the next revision, reads them again when a
// watch fails (compaction, lost leader, closed channel), and decodes every
// key-value by one set of rules: a member or drain key whose ID is not a
// valid node ID is ignored (so that every reader computes the same ring), a
// member value that cannot be decoded is kept with an empty address, a
// drain mark counts whatever its value, a claim value is decoded by
// keys.DecodeClaim (both of its forms), and a claim outside [0, P) is
// counted and logged once, never applied.
//
// It reads etcd only through clientv3.KV and clientv3.Watcher. It is safe
// for concurrent use; follow runs on the consumer's goroutine of choice.
type fleetReader struct {
	kv         clientv3.KV
	watcher    clientv3.Watcher
	layout     keys.Layout
	partitions int
	log        hclog.Logger
	clock      clock.Clock

	warned atomic.Bool // a claim outside [0, P) has been logged
}

// memberRec is a decoded member key: the member and the lease it is bound
// to.
type memberRec struct {
	m     Member
	lease clientv3.LeaseID
}

// claim is a decoded claim key; the zero claim is no claim.
type claim struct {
	owner string
	epoch int64 // CreateRevision; 0 when there is no claim
	lease clientv3.LeaseID
	since time.Time // when the owner created it, by its clock; zero if unknown
}

// listing is the members, drain marks and claims read at one revision.
type listing struct {
	rev     int64
	members map[string]memberRec
	drained map[string]bool // IDs of the drained nodes
	claims  []claim         // by partition
	outside int             // claim keys of partitions outside [0, P)
}

// fleetEvent is one decoded change of a member, drain or claim key.
type fleetEvent struct {
	rev    int64 // the change's revision
	member bool  // a member key
	drain  bool  // a drain mark (neither: a claim key)
	put    bool  // put (else delete)

	id  string    // member or drain mark: the node ID
	rec memberRec // member put: the member

	p     int   // claim: the partition
	claim claim // claim put: the claim
}

// fleetUpdate is one delivery of fleetReader.follow: the watch ended
// (stale; a listing follows), a new listing that replaces everything known,
// or a batch of events in revision order.
type fleetUpdate struct {
	stale  bool
	lst    *listing
	rev    int64 // events: the revision of the watch response
	events []fleetEvent
}

// list reads the members, drain marks and claims at one revision.
func (r *fleetReader) list(ctx context.Context) (*listing, error) {
	resp, err := r.kv.Txn(ctx).Then(
		clientv3.OpGet(r.layout.Members(), clientv3.WithPrefix()),
		clientv3.OpGet(r.layout.Claims(), clientv3.WithPrefix()),
		clientv3.OpGet(r.layout.DrainedPrefix(), clientv3.WithPrefix(), clientv3.WithKeysOnly()),
	).Commit()
	if err != nil {
		return nil, fmt.Errorf("ownership: read members and claims: %w", err)
	}
	if len(resp.Responses) != 3 {
		return nil, fmt.Errorf("ownership: read members and claims: %d responses for 3 reads", len(resp.Responses))
	}
	return r.listing(resp.Header.Revision,
		resp.Responses[0].GetResponseRange().GetKvs(),
		resp.Responses[1].GetResponseRange().GetKvs(),
		resp.Responses[2].GetResponseRange().GetKvs()), nil
}

// listing decodes the member, claim and drain key-values read at revision
// rev.
func (r *fleetReader) listing(rev int64, members, claims, drained []*mvccpb.KeyValue) *listing {
	lst := &listing{rev: rev, members: make(map[string]memberRec), drained: make(map[string]bool), claims: make([]claim, r.partitions)}
	for _, kv := range drained {
		if id, ok := r.drainedID(kv.Key); ok {
			lst.drained[id] = true
		}
	}
	for _, kv := range members {
		if id, rec, ok := r.member(kv); ok {
			lst.members[id] = rec
		}
	}
	for _, kv := range claims {
		if p, ok := r.partition(kv.Key); ok {
			lst.claims[p] = claimOf(kv)
		} else if p >= 0 {
			lst.outside++
		}
	}
	return lst
}

// member decodes a member key-value. ok is false for a key whose ID is not
// a valid node ID.
func (r *fleetReader) member(kv *mvccpb.KeyValue) (id string, rec memberRec, ok bool) {
	id, ok = r.layout.MemberID(string(kv.Key))
	if !ok || ValidateNodeID(id) != nil {
		r.log.Warn("ignoring member key with an invalid node ID", "key", string(kv.Key))
		return "", memberRec{}, false
	}
	m, err := keys.DecodeMember(kv.Value)
	if err != nil {
		r.log.Warn("undecodable member value; using an empty address", "node", id, "error", err)
		m = keys.Member{}
	}
	return id, memberRec{m: Member{ID: id, Addr: m.Addr, Meta: m.Meta}, lease: clientv3.LeaseID(kv.Lease)}, true
}

// drainedID returns the node ID of a drain key. ok is false for a key
// whose ID is not a valid node ID.
func (r *fleetReader) drainedID(key []byte) (string, bool) {
	id, ok := r.layout.DrainedID(string(key))
	if !ok || ValidateNodeID(id) != nil {
		r.log.Warn("ignoring drain key with an invalid node ID", "key", string(key))
		return "", false
	}
	return id, true
}

// partition returns the partition of a claim key. It returns ok false and
// p >= 0 for a claim key outside [0, P), which it logs once, and p < 0 for
// a key that is not a claim key.
func (r *fleetReader) partition(key []byte) (p int, ok bool) {
	p, ok = r.layout.ClaimPartition(string(key))
	if !ok {
		return -1, false
	}
	if p >= r.partitions {
		if r.warned.CompareAndSwap(false, true) {
			r.log.Error("claim for a partition beyond the configured count: the partition count does not match the fleet's",
				"key", string(key), "partitions", r.partitions)
		}
		return p, false
	}
	return p, true
}

// claimOf is the claim a claim key-value holds; nil: no claim. The value
// is either form keys.DecodeClaim reads.
func claimOf(kv *mvccpb.KeyValue) claim {
	if kv == nil {
		return claim{}
	}
	c := keys.DecodeClaim(kv.Value)
	return claim{owner: c.Node, epoch: kv.CreateRevision, lease: clientv3.LeaseID(kv.Lease), since: c.Since}
}

// errWatchEnded reports a watch channel that closed or was cancelled.
var errWatchEnded = errors.New("ownership: watch ended")

// follow watches the members and claims after revision rev and hands every
// change to deliver, in order, until ctx ends or deliver returns false.
// When a watch fails it delivers a stale update, reads everything again
// (each attempt bounded by timeout, if positive; failures retried with
// backoff) and delivers the new listing before it watches again. While it
// follows, it keeps the etcd client from waiting out gRPC's reconnect
// backoff (redial).
func (r *fleetReader) follow(ctx context.Context, rev int64, timeout time.Duration, deliver func(fleetUpdate) bool) {
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
		err := r.watch(ctx, rev, deliver)
		if ctx.Err() != nil || errors.Is(err, errStopped) {
			return
		}
		r.log.Debug("watch ended; reading members and claims again", "error", err)
		if !deliver(fleetUpdate{stale: true}) {
			return
		}
		lst := r.relist(ctx, timeout)
		if lst == nil || !deliver(fleetUpdate{lst: lst}) {
			return
		}
		rev = lst.rev
	}
}

// redial asks the etcd client to reconnect at once (etcderr.Redial) every
// rejoinRetry while its connection is down, until ctx ends. A watch whose
// connection is lost does not fail: the client reopens it once the
// connection is back, and a read waits for the connection too, so that
// without redial a reader would see etcd again only when gRPC's reconnect
// backoff, which grows to minutes, next lets it try. It returns at once
// for a client that has no gRPC connection to watch.
func (r *fleetReader) redial(ctx context.Context) {
	for etcderr.WaitDown(ctx, r.watcher) {
		etcderr.Redial(r.watcher)
		if !clock.Sleep(ctx, r.clock, rejoinRetry) {
			return
		}
	}
}

// relist reads the members and claims until it succeeds; nil if ctx ended
// first.
func (r *fleetReader) relist(ctx context.Context, timeout time.Duration) *listing {
	for attempt := 0; ; attempt++ {
		lctx, cancel := ctx, context.CancelFunc(func() {})
		if timeout > 0 {
			lctx, cancel = clock.WithTimeout(ctx, r.clock, timeout)
		}
		lst, err := r.list(lctx)
		cancel()
		if err == nil {
			return lst
		}
		if ctx.Err() != nil {
			return nil
		}
		r.log.Warn("read members and claims", "error", err, "attempt", attempt)
		if !clock.Sleep(ctx, r.clock, backoff(attempt)) {
			return nil
		}
	}
}

// errStopped reports that the consumer stopped taking updates.
var errStopped = errors.New("ownership: fleet consumer stopped")

// watch delivers the decoded events of the member, drain and claim watches
// after revision rev until a watch fails, ctx ends or deliver returns false.
func (r *fleetReader) watch(ctx context.Context, rev int64, deliver func(fleetUpdate) bool) error {
	wctx, cancel := context.WithCancel(watchstream.Own(clientv3.WithRequireLeader(ctx)))
	defer cancel()
	mch := r.watcher.Watch(wctx, r.layout.Members(), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	cch := r.watcher.Watch(wctx, r.layout.Claims(), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	dch := r.watcher.Watch(wctx, r.layout.DrainedPrefix(), clientv3.WithPrefix(), clientv3.WithRev(rev+1), clientv3.WithKeysOnly())
	for {
		var (
			resp clientv3.WatchResponse
			ok   bool
			kind eventKind
		)
		select {
		case resp, ok = <-mch:
			kind = memberEvents
		case resp, ok = <-cch:
			kind = claimEvents
		case resp, ok = <-dch:
			kind = drainEvents
		case <-ctx.Done():
			return ctx.Err()
		}
		switch {
		case resp.Err() != nil:
			return fmt.Errorf("%w (compact revision %d): %w", errWatchEnded, resp.CompactRevision, resp.Err())
		case !ok || resp.Canceled:
			return errWatchEnded
		case len(resp.Events) == 0:
			continue
		}
		if !deliver(fleetUpdate{rev: resp.Header.Revision, events: r.decode(resp.Events, kind)}) {
			return errStopped
		}
	}
}

// eventKind says which of the fleet's watches a response came from.
type eventKind uint8

const (
	claimEvents eventKind = iota
	memberEvents
	drainEvents
)

// decode decodes the events of one watch response of the given kind.
func (r *fleetReader) decode(evs []*clientv3.Event, kind eventKind) []fleetEvent {
	out := make([]fleetEvent, 0, len(evs))
	for _, ev := range evs {
		e := fleetEvent{rev: ev.Kv.ModRevision, member: kind == memberEvents, drain: kind == drainEvents, put: ev.Type == clientv3.EventTypePut}
		var ok bool
		switch {
		case e.member && e.put:
			e.id, e.rec, ok = r.member(ev.Kv)
		case e.member:
			e.id, ok = r.layout.MemberID(string(ev.Kv.Key))
		case e.drain:
			e.id, ok = r.drainedID(ev.Kv.Key)
		default:
			e.p, ok = r.partition(ev.Kv.Key)
			if ok && e.put {
				e.claim = claimOf(ev.Kv)
			}
		}
		if ok {
			out = append(out, e)
		}
	}
	return out
}
