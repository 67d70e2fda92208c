package ownership

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/fleetview"
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

// checkFeatures returns an error wrapping ring.ErrFeatureUnsupported if spec, read after this
// node's member key was written at createRev, records a feature in use that
// the node's build lacks; it deletes the member key first. A command that
// records a feature checks in the same transaction that no member key was
// written since it read the members (fleetview.RequireFeature), so either
// it saw this node's key and refused, or this read sees its feature.
func (n *Node) checkFeatures(ctx context.Context, spec fleetview.Spec, createRev int64) error {
	lacking := fleetview.Lacking(n.cfg.buildFeatures(), spec.Requires)
	if len(lacking) == 0 {
		return nil
	}
	if err := n.unregisterTxn(ctx, createRev); err != nil {
		n.log.Warn("delete the member key of a refused join; it expires with the lease", "error", err)
	}
	n.log.Error("refused: the fleet uses a protocol feature this build does not understand", "feature", lacking[0], "build", fleetview.Build())
	return fleetview.FeatureError(lacking[0], nil)
}

// connect starts a generation: it opens a Session, creates the member key
// if absent (or takes over the one bound to prev, the lease of the
// previous generation, if not zero; see registerTxn) and reads the members
// and claims. ctx bounds the whole. connect never waits on prev: the
// claims left under it are deleted by the new generation (reconcile), and
// the lease itself is revoked off the critical path (revokeStale).
func (n *Node) connect(ctx context.Context, prev clientv3.LeaseID) (*generation, *fleetview.Listing, error) {
	sess, err := election.NewSession(ctx, n.cli, n.cfg.Session)
	if err != nil {
		return nil, nil, fmt.Errorf("ownership: open session: %w", err)
	}
	ok := false
	defer func() {
		if ok {
			return
		}
		if prev != 0 { // a rejoin does not wait for the revoke
			n.spawn(func() { n.closeSession(sess) })
			return
		}
		cctx, cancel := n.withTimeout(context.WithoutCancel(ctx), sess.TTL())
		_ = sess.Close(cctx)
		cancel()
	}()
	val, err := keys.EncodeMember(keys.Member{ID: n.id, Addr: n.cfg.Addr, Meta: n.cfg.Meta, Weight: n.cfg.Weight, Prepares: n.prepares(),
		TTLSeconds: int64(sess.TTL() / time.Second), Build: fleetview.Build(), Features: n.cfg.buildFeatures()})
	if err != nil {
		return nil, nil, fmt.Errorf("ownership: encode member: %w", err)
	}
	memberRev, err := n.registerTxn(ctx, sess.Lease(), prev, val)
	if err != nil {
		return nil, nil, err
	}
	lst, err := n.reader.List(ctx)
	if err != nil {
		return nil, nil, err
	}
	if err := n.checkFeatures(ctx, lst.Spec, memberRev); err != nil {
		return nil, nil, err
	}
	g := &generation{id: n.genSeq.Add(1), sess: sess, lease: sess.Lease(), memberRev: memberRev}
	g.ctx, g.cancel = context.WithCancelCause(n.rootCtx)
	g.stop = context.AfterFunc(sess.Context(), func() { g.cancel(ErrLost) })
	ok = true
	return g, lst, nil
}
