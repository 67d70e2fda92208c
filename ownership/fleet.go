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
	"github.com/tenure-go/tenure/internal/keys"
)

// fleetReader is the one reader of a cluster's members and claims in etcd,
// shared by the Node's event loop and the Observer of callers outside the
// fleet. It reads both at one revision (a listing), watches both from the
// next revision, reads them again when a watch fails (compaction, lost
// leader, closed channel), and decodes every key-value by one set of rules:
// a member key whose ID is not a valid node ID is ignored (so that every
// reader computes the same ring), a member value that cannot be decoded is
// kept with an empty address, and a claim outside [0, P) is counted and
// logged once, never applied.
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
}

// listing is the members and claims read at one revision.
type listing struct {
	rev     int64
	members map[string]memberRec
	claims  []claim // by partition
	outside int     // claim keys of partitions outside [0, P)
}

// fleetEvent is one decoded change of a member or claim key.
type fleetEvent struct {
	rev    int64 // the change's revision
	member bool  // a member key (else a claim key)
	put    bool  // put (else delete)

	id  string    // member: the node ID
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

// list reads the members and claims at one revision.
func (r *fleetReader) list(ctx context.Context) (*listing, error) {
	resp, err := r.kv.Txn(ctx).Then(
		clientv3.OpGet(r.layout.Members(), clientv3.WithPrefix()),
		clientv3.OpGet(r.layout.Claims(), clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, fmt.Errorf("ownership: read members and claims: %w", err)
	}
	lst := &listing{rev: resp.Header.Revision, members: make(map[string]memberRec), claims: make([]claim, r.partitions)}
	if len(resp.Responses) != 2 {
		return nil, fmt.Errorf("ownership: read members and claims: %d responses for 2 reads", len(resp.Responses))
	}
	for _, kv := range resp.Responses[0].GetResponseRange().GetKvs() {
		if id, rec, ok := r.member(kv); ok {
			lst.members[id] = rec
		}
	}
	for _, kv := range resp.Responses[1].GetResponseRange().GetKvs() {
		if p, ok := r.partition(kv.Key); ok {
			lst.claims[p] = claimOf(kv)
		} else if p >= 0 {
			lst.outside++
		}
	}
	return lst, nil
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

// claimOf is the claim a claim key-value holds; nil: no claim.
func claimOf(kv *mvccpb.KeyValue) claim {
	if kv == nil {
		return claim{}
	}
	return claim{owner: string(kv.Value), epoch: kv.CreateRevision, lease: clientv3.LeaseID(kv.Lease)}
}

// errWatchEnded reports a watch channel that closed or was cancelled.
var errWatchEnded = errors.New("ownership: watch ended")

// follow watches the members and claims after revision rev and hands every
// change to deliver, in order, until ctx ends or deliver returns false.
// When a watch fails it delivers a stale update, reads everything again
// (each attempt bounded by timeout, if positive; failures retried with
// backoff) and delivers the new listing before it watches again.
func (r *fleetReader) follow(ctx context.Context, rev int64, timeout time.Duration, deliver func(fleetUpdate) bool) {
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

// watch delivers the decoded events of the member and claim watches after
// revision rev until a watch fails, ctx ends or deliver returns false.
func (r *fleetReader) watch(ctx context.Context, rev int64, deliver func(fleetUpdate) bool) error {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	mch := r.watcher.Watch(wctx, r.layout.Members(), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	cch := r.watcher.Watch(wctx, r.layout.Claims(), clientv3.WithPrefix(), clientv3.WithRev(rev+1))
	for {
		var (
			resp    clientv3.WatchResponse
			ok      bool
			members bool
		)
		select {
		case resp, ok = <-mch:
			members = true
		case resp, ok = <-cch:
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
		if !deliver(fleetUpdate{rev: resp.Header.Revision, events: r.decode(resp.Events, members)}) {
			return errStopped
		}
	}
}

// decode decodes the events of one watch response.
func (r *fleetReader) decode(evs []*clientv3.Event, members bool) []fleetEvent {
	out := make([]fleetEvent, 0, len(evs))
	for _, ev := range evs {
		e := fleetEvent{rev: ev.Kv.ModRevision, member: members, put: ev.Type == clientv3.EventTypePut}
		var ok bool
		switch {
		case members && e.put:
			e.id, e.rec, ok = r.member(ev.Kv)
		case members:
			e.id, ok = r.layout.MemberID(string(ev.Kv.Key))
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
