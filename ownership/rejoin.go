package ownership

import (
	"context"
	"errors"
	"fmt"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/etcderr"
	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/retry"
	"github.com/tenure-go/tenure/ownership/ring"
)

// run is the event loop. It returns when the node is closed.
func (l *loop) run() error {
	for {
		closed, err := l.serve()
		if closed {
			return err
		}
		l.loseAll(err)
		if l.closing {
			// Close was handing off when the session ended: the remaining
			// claims go with the lease.
			ctx, cancel := l.n.withTimeout(l.n.rootCtx, l.gen.sess.TTL())
			_ = l.gen.sess.Close(ctx)
			cancel()
			l.publishClosed()
			return fmt.Errorf("ownership: close %s: session ended during the handoff: %w", l.n.id, err)
		}
		if err := l.rejoin(); err != nil {
			l.publishClosed()
			if errors.Is(err, ErrClosed) {
				return nil
			}
			return err
		}
	}
}

// rejoin opens a new generation, retrying until it succeeds. It returns
// an error wrapping ErrClosed if the node was closed first, or
// ErrClientClosed if the etcd client was.
//
// Nothing on the way waits on the old lease: the new member key takes over
// the old one (registerTxn), or one bound to the lease of an earlier
// session of this node (as etcd restored from a snapshot holds it), the
// new generation deletes the claims left under the old leases (reconcile), and the old lease is revoked in the
// background once the node has rejoined (closeSession). While it rejoins,
// the node asks the etcd client to reconnect every rejoinRetry (redial),
// and an attempt that fails is retried within rejoinRetry, so that the
// node is back within about rejoinRetry of etcd serving again, whatever
// the length of the outage.
func (l *loop) rejoin() error {
	n := l.n
	old := l.gen.sess
	if err := n.clientErr(nil); err != nil {
		return err
	}
	rctx, stopRedial := context.WithCancel(n.rootCtx)
	defer stopRedial()
	n.spawn(func() { n.redial(rctx) })
	prev := old.Lease()
	for attempt := 0; ; attempt++ {
		if n.closeCtx.Err() != nil {
			return ErrClosed
		}
		if err := n.clientErr(nil); err != nil {
			return err
		}
		ctx, cancel := n.withTimeout(n.closeCtx, old.TTL())
		gen, lst, err := n.connect(ctx, prev)
		cancel()
		if err == nil {
			l.install(gen, lst)
			n.log.Info("rejoined", "lease", fmt.Sprintf("%x", int64(gen.lease)), "attempt", attempt)
			n.spawn(func() { n.closeSession(old) })
			return nil
		}
		if n.closeCtx.Err() != nil {
			return ErrClosed
		}
		if cerr := n.clientErr(err); cerr != nil {
			return cerr
		}
		if errors.Is(err, ring.ErrFeatureUnsupported) {
			return err
		}
		delay := retry.Rejoin().Next(attempt + 1)
		var dup *DuplicateMemberError
		switch {
		case errors.As(err, &dup) && l.ownLease(dup.Lease) && clientv3.LeaseID(dup.Lease) != prev:
			// An earlier session of this node holds the member key, as
			// after etcd was restored from a snapshot taken then: take it
			// over at once, as the last session's.
			n.log.Info("rejoin: the member key is held by an earlier session of this node; taking it over", "held_by", fmt.Sprintf("%x", dup.Lease), "attempt", attempt)
			prev, delay = clientv3.LeaseID(dup.Lease), 0
		case errors.As(err, &dup):
			n.log.Error("rejoin: the node ID is taken by another process", "error", err, "attempt", attempt)
			delay = backoff(attempt)
		default:
			n.log.Warn("rejoin", "error", err, "attempt", attempt)
		}
		if !n.sleep(n.closeCtx, delay) {
			return ErrClosed
		}
	}
}

// maxPastLeases bounds the leases of its earlier sessions a node
// remembers as its own.
const maxPastLeases = 64

// ownLease reports whether lease is one of this node's sessions'.
func (l *loop) ownLease(lease int64) bool {
	return lease != 0 && slices.Contains(l.leases, clientv3.LeaseID(lease))
}

// rejoinRetry caps the delay between rejoin attempts and is the interval at
// which a rejoining node, and a reader of the fleet whose connection is
// down (fleetview.Reader), ask their etcd client to reconnect; it is what
// an etcd outage costs a node or an Observer beyond the round trips of its
// rejoin and claims or of its reads.
const rejoinRetry = fleetview.RedialEvery

// redial asks the node's etcd client to reconnect at once
// (etcderr.Redial), every rejoinRetry until ctx ends: gRPC's own reconnect
// backoff grows to minutes, which would keep a node away for as long after
// etcd serves again. It returns at once for a client that has no gRPC
// connection to ask.
func (n *Node) redial(ctx context.Context) {
	for etcderr.Redial(n.cli) {
		if !n.sleep(ctx, rejoinRetry) {
			return
		}
	}
}

// closeSession closes sess, a session of this node that has ended or never
// served, and revokes its lease, best effort: it waits at most the
// session's TTL, and stops when the node stops. A lease it cannot revoke
// expires on its own; the keys bound to it have been taken over or are
// deleted by the node's current generation.
func (n *Node) closeSession(sess *election.Session) {
	ctx, cancel := n.withTimeout(n.rootCtx, sess.TTL())
	defer cancel()
	if err := sess.Close(ctx); err != nil {
		n.log.Debug("revoke the lease of an ended session; it expires on its own", "lease", fmt.Sprintf("%x", int64(sess.Lease())), "error", err)
	}
}

// clientErr returns an error wrapping ErrClientClosed if the node's etcd
// client has been closed, as its context (for a *clientv3.Client) or err,
// the error of a call through it, shows; nil if not.
func (n *Node) clientErr(err error) error {
	if n.clientCtx != nil && n.clientCtx.Err() != nil || etcderr.ClientClosed(err) {
		if err == nil {
			err = context.Cause(n.clientCtx)
		}
		n.log.Error("etcd client closed under the node; stopping", "error", err)
		return fmt.Errorf("ownership: node %s: %w", n.id, ErrClientClosed)
	}
	return nil
}
