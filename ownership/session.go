package ownership

import (
	"context"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/etcderr"
	"github.com/tenure-go/tenure/internal/keys"
)

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
	memberRev, err := n.registerTxn(ctx, sess.Lease(), val)
	if err != nil {
		return nil, nil, err
	}
	lst, err := n.reader.list(ctx)
	if err != nil {
		return nil, nil, err
	}
	g := &generation{id: n.genSeq.Add(1), sess: sess, lease: sess.Lease(), memberRev: memberRev}
	g.ctx, g.cancel = context.WithCancelCause(n.rootCtx)
	g.stop = context.AfterFunc(sess.Context(), func() { g.cancel(ErrLost) })
	ok = true
	return g, lst, nil
}
