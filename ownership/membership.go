package ownership

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/etcderr"
	"github.com/tenure-go/tenure/internal/keys"
)

// errMemberGone ends a generation whose member key was deleted or taken
// over while its session was still alive.
var errMemberGone = errors.New("ownership: member key deleted or replaced")

// generation is one Session of the node, with its member key. The node
// starts a new generation after every loss.
type generation struct {
	id        uint64
	sess      *election.Session
	lease     clientv3.LeaseID
	memberRev int64 // CreateRevision of the member key

	// ctx is cancelled (cause ErrLost) as soon as the session ends, and
	// when the generation is over. Tenure contexts derive from it, so work
	// is cancelled at once, without waiting for the event loop.
	ctx    context.Context
	cancel context.CancelCauseFunc
	stop   func() bool
}

// end cancels the generation's context and detaches it from the session.
func (g *generation) end(cause error) {
	g.stop()
	g.cancel(cause)
}

// listing is the members and claims read at one revision.
type listing struct {
	rev     int64
	members []*mvccpb.KeyValue
	claims  []*mvccpb.KeyValue
}

// memberRec is a member as the event loop tracks it.
type memberRec struct {
	m     Member
	lease clientv3.LeaseID
}

// connect starts a generation: it revokes oldLease (the lease of the
// previous generation, if any; one etcd no longer has is fine), opens a
// Session, creates the member key if absent and reads the members and
// claims. ctx bounds the whole.
func (n *Node) connect(ctx context.Context, oldLease clientv3.LeaseID) (*generation, *listing, error) {
	if oldLease != 0 {
		if _, err := n.cli.Revoke(ctx, oldLease); err != nil && !etcderr.LeaseNotFound(err) {
			return nil, nil, fmt.Errorf("ownership: revoke previous lease %x: %w", int64(oldLease), err)
		}
	}
	sess, err := election.NewSession(ctx, n.cli, n.cfg.Session)
	if err != nil {
		return nil, nil, fmt.Errorf("ownership: open session: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			cctx, cancel := n.withTimeout(context.WithoutCancel(ctx), sess.TTL())
			_ = sess.Close(cctx)
			cancel()
		}
	}()
	val, err := keys.EncodeMember(keys.Member{ID: n.id, Addr: n.cfg.Addr, Meta: n.cfg.Meta})
	if err != nil {
		return nil, nil, fmt.Errorf("ownership: encode member: %w", err)
	}
	mk := n.layout.Member(n.id)
	resp, err := n.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(mk), "=", 0)).
		Then(clientv3.OpPut(mk, val, clientv3.WithLease(sess.Lease()))).
		Else(clientv3.OpGet(mk)).
		Commit()
	if err != nil {
		return nil, nil, fmt.Errorf("ownership: register member %q: %w", n.id, err)
	}
	if !resp.Succeeded {
		var holder int64
		if len(resp.Responses) > 0 {
			if rr := resp.Responses[0].GetResponseRange(); rr != nil && len(rr.Kvs) > 0 {
				holder = rr.Kvs[0].Lease
			}
		}
		return nil, nil, &DuplicateMemberError{ID: n.id, Lease: holder}
	}
	memberRev := resp.Header.Revision
	lst, err := n.list(ctx)
	if err != nil {
		return nil, nil, err
	}
	g := &generation{id: n.genSeq.Add(1), sess: sess, lease: sess.Lease(), memberRev: memberRev}
	g.ctx, g.cancel = context.WithCancelCause(n.rootCtx)
	g.stop = context.AfterFunc(sess.Context(), func() { g.cancel(ErrLost) })
	ok = true
	return g, lst, nil
}

// list reads the members and claims at one revision.
func (n *Node) list(ctx context.Context) (*listing, error) {
	resp, err := n.cli.Txn(ctx).Then(
		clientv3.OpGet(n.layout.Members(), clientv3.WithPrefix()),
		clientv3.OpGet(n.layout.Claims(), clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, fmt.Errorf("ownership: read members and claims: %w", err)
	}
	lst := &listing{rev: resp.Header.Revision}
	if len(resp.Responses) == 2 {
		if rr := resp.Responses[0].GetResponseRange(); rr != nil {
			lst.members = rr.Kvs
		}
		if rr := resp.Responses[1].GetResponseRange(); rr != nil {
			lst.claims = rr.Kvs
		}
	}
	return lst, nil
}

// watch starts the watches of members and claims from rev.
func (l *loop) watch(rev int64) {
	n := l.n
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(l.gen.ctx))
	l.stopWatch = cancel
	l.mch = n.cli.Watch(ctx, n.layout.Members(), clientv3.WithPrefix(), clientv3.WithRev(rev))
	l.cch = n.cli.Watch(ctx, n.layout.Claims(), clientv3.WithPrefix(), clientv3.WithRev(rev))
}

// unwatch stops the watches.
func (l *loop) unwatch() {
	if l.stopWatch != nil {
		l.stopWatch()
		l.stopWatch = nil
	}
	l.mch, l.cch = nil, nil
}

// onWatch handles one watch response; ok is false if the channel closed.
func (l *loop) onWatch(resp clientv3.WatchResponse, ok, members bool) {
	if !ok || resp.Canceled || resp.Err() != nil {
		what := "claims"
		if members {
			what = "members"
		}
		l.n.log.Debug("watch ended, reading members and claims again", "watch", what, "error", resp.Err(), "compact_revision", resp.CompactRevision)
		l.resync(0)
		return
	}
	for _, ev := range resp.Events {
		if members {
			l.onMember(ev)
		} else {
			l.onClaim(ev)
		}
	}
}

// resync replaces the watches: it reads members and claims again and
// watches from there. It is used when a watch ends (compaction, lost
// leader, closed channel).
func (l *loop) resync(attempt int) {
	if l.resyncing && attempt == 0 {
		return
	}
	l.unwatch()
	l.resyncing = true
	n, gen := l.n, l.gen
	n.spawn(func() {
		ctx, cancel := n.withTimeout(gen.ctx, gen.sess.TTL())
		defer cancel()
		lst, err := n.list(ctx)
		n.post(gen, func(l *loop) {
			if err != nil {
				n.log.Warn("read members and claims", "error", err, "attempt", attempt)
				n.after(gen, backoff(attempt), func(l *loop) { l.resync(attempt + 1) })
				return
			}
			l.resyncing = false
			l.applyListing(lst)
			l.watch(lst.rev + 1)
		})
	})
}

// applyListing replaces the members and claims with lst.
func (l *loop) applyListing(lst *listing) {
	clear(l.members)
	for _, kv := range lst.members {
		if id, rec, ok := l.memberOf(kv); ok {
			l.members[id] = rec
		}
	}
	if me, ok := l.members[l.n.id]; !l.closing && (!ok || me.lease != l.gen.lease) {
		l.lost = errMemberGone
	}
	seen := make([]bool, len(l.claims))
	for _, kv := range lst.claims {
		p, ok := l.partitionOf(kv.Key)
		if !ok {
			continue
		}
		seen[p] = true
		l.applyClaim(p, lst.rev, kv)
	}
	for p, s := range seen {
		if !s {
			l.applyClaim(p, lst.rev, nil)
		}
	}
	l.updateRing()
	l.dirty = true
}

// memberOf decodes a member key-value. Keys whose ID is not a valid node
// ID are ignored, so that every node computes the same ring.
func (l *loop) memberOf(kv *mvccpb.KeyValue) (string, memberRec, bool) {
	id, ok := l.n.layout.MemberID(string(kv.Key))
	if !ok || ValidateNodeID(id) != nil {
		l.n.log.Warn("ignoring member key with an invalid node ID", "key", string(kv.Key))
		return "", memberRec{}, false
	}
	m, err := keys.DecodeMember(kv.Value)
	if err != nil {
		l.n.log.Warn("undecodable member value; using an empty address", "node", id, "error", err)
	}
	return id, memberRec{m: Member{ID: id, Addr: m.Addr, Meta: m.Meta}, lease: clientv3.LeaseID(kv.Lease)}, true
}

// onMember applies one event of the members watch.
func (l *loop) onMember(ev *clientv3.Event) {
	me := l.n.id
	switch ev.Type {
	case clientv3.EventTypePut:
		id, rec, ok := l.memberOf(ev.Kv)
		if !ok {
			return
		}
		l.members[id] = rec
		if id == me && rec.lease != l.gen.lease && !l.closing {
			l.lost = errMemberGone
		}
	case clientv3.EventTypeDelete:
		id, ok := l.n.layout.MemberID(string(ev.Kv.Key))
		if !ok {
			return
		}
		delete(l.members, id)
		if id == me && !l.closing {
			l.lost = errMemberGone
		}
	}
	l.updateRing()
	l.dirty = true
}

// updateRing recomputes the ring if the member set changed.
func (l *loop) updateRing() {
	ids := make([]string, 0, len(l.members))
	for id := range l.members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	if l.ring != nil && slices.Equal(ids, l.ids) {
		return
	}
	r, err := NewRing(ids, l.n.cfg.Ring)
	if err != nil { // cannot happen: IDs are validated and unique
		l.n.log.Error("compute ring", "error", err)
		return
	}
	l.ids, l.ring = ids, r
	l.me = r.MemberIndex(l.n.id)
	l.n.log.Debug("ring changed", "members", len(ids), "owned", r.Load(l.n.id), "version", r.Version())
}
