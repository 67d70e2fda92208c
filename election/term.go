package election

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tenure-go/tenure/internal/clock"
	"github.com/tenure-go/tenure/internal/etcderr"
	"github.com/tenure-go/tenure/internal/leaderkey"
	"github.com/tenure-go/tenure/internal/retry"
	"github.com/tenure-go/tenure/internal/watchstream"

	"github.com/hashicorp/go-hclog"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
)

// Term is one tenure of leadership won by Campaign. Its epoch, the create
// revision of the leader key, is the fencing token of everything done under
// it.
//
// The term's context is cancelled the moment the term ends: on Resign, when
// the session ends (which it does before its safe deadline), or when the
// leader key is deleted or replaced (for example by an operator). Work done
// for the leader must run under Context and carry Token; writes to etcd can
// add Cmp to their transaction to land only while the term stands.
//
// A Term is safe for concurrent use. It has no lock of its own: whether the
// Election still holds it is guarded by the Election's one lock, and its
// end is its context's cancellation.
type Term struct {
	e      *Election
	key    string
	token  fence.Token
	sig    fence.Signature // the token's signature; zero without a Signer
	rev    int64           // revision at which the term was won
	ctx    context.Context
	cancel context.CancelCauseFunc
	log    hclog.Logger

	// Guarded by the Election's mu.
	live  bool      // handed out by Campaign
	since time.Time // when it was handed out
	ended bool      // its watch has ended

	watchDone chan struct{} // closed when the key watch has ended
}

func newTerm(e *Election, epoch, rev int64) *Term {
	ctx, cancel := context.WithCancelCause(e.session.Context())
	tok := fence.Token{Scope: e.scope, Epoch: epoch}
	var sig fence.Signature
	if e.cfg.Signer != nil {
		sig, _ = e.cfg.Signer.Sign(tok) // a valid token: Sign cannot fail
	}
	return &Term{
		e:         e,
		key:       e.key,
		token:     tok,
		sig:       sig,
		rev:       rev,
		ctx:       ctx,
		cancel:    cancel,
		log:       e.log.With("epoch", epoch),
		watchDone: make(chan struct{}),
	}
}

// Token returns the term's fencing token: Scope "leader/<name>", Epoch the
// leader key's create revision (the term's epoch).
func (t *Term) Token() fence.Token { return t.token }

// Signature returns the signature of the term's token by
// ElectionConfig.Signer, the zero fence.Signature without one. Put both in
// a context with fence.NewSignedContext (Run's fn gets such a context) for
// httpfence.Transport to send downstream.
func (t *Term) Signature() fence.Signature { return t.sig }

// Key returns the leader key.
func (t *Term) Key() string { return t.key }

// Context returns a context that is cancelled when the term ends. Its cause
// (context.Cause) is the session's error if the session ended, otherwise
// ErrResigned or ErrKeyDeleted (both wrapping ErrNotLeader).
func (t *Term) Context() context.Context { return t.ctx }

// Done returns a channel that is closed when the term ends.
func (t *Term) Done() <-chan struct{} { return t.ctx.Done() }

// Err returns nil while the term stands, then an error wrapping ErrNotLeader
// and the reason the term ended (ErrResigned, ErrKeyDeleted, or the
// session's error).
func (t *Term) Err() error {
	if t.ctx.Err() == nil {
		if s := t.e.session; s == nil || s.Err() == nil {
			return nil
		}
		<-t.ctx.Done() // the session's end cancels the term's context
	}
	cause := context.Cause(t.ctx)
	if errors.Is(cause, ErrNotLeader) {
		return cause
	}
	return fmt.Errorf("%w: %w", ErrNotLeader, cause)
}

// Cmp returns a comparison that holds only while the leader key is the one
// this term created: add it to the If of an etcd transaction to make a write
// land only while this term stands, whatever the writer's own view of time.
func (t *Term) Cmp() clientv3.Cmp {
	return clientv3.Compare(clientv3.CreateRevision(t.key), "=", t.token.Epoch)
}

// Proclaim publishes value as the leader's value without ending the term,
// as etcd's concurrency.Election.Proclaim: it puts the leader key (same
// candidate ID, same lease) in a transaction guarded by Cmp, so the put
// lands only while the key is the one this term created. Leader and
// Observe then report value as Leader.Value. The value lasts for this term;
// a later term publishes ElectionConfig.Value again.
//
// A stale leader never overwrites its successor: Proclaim on a term that
// has ended returns Err (wrapping ErrNotLeader) without writing, and when
// etcd finds the leader key deleted or replaced — the term has ended
// without this process knowing yet — nothing is written, the term ends
// with ErrKeyDeleted, and Proclaim returns an error wrapping ErrKeyDeleted
// (and so ErrNotLeader). Other failures wrap etcd's error; the value may or
// may not have been written. Proclaim is safe for concurrent use; of
// concurrent calls, the last one etcd applies wins.
func (t *Term) Proclaim(ctx context.Context, value string) error {
	e := t.e
	if err := t.Err(); err != nil {
		return fmt.Errorf("election %q: proclaim epoch %d: %w", e.cfg.Name, t.token.Epoch, err)
	}
	put := clientv3.OpPut(t.key, leaderkey.Encode(e.id, value), clientv3.WithLease(e.session.Lease()))
	resp, err := e.kv.Txn(ctx).If(t.Cmp()).Then(put).Commit()
	if err != nil {
		if etcderr.LeaseNotFound(err) {
			e.session.missing(err)
		}
		return fmt.Errorf("election %q: proclaim epoch %d: %w", e.cfg.Name, t.token.Epoch, err)
	}
	if !resp.Succeeded {
		err := fmt.Errorf("%w: election %q epoch %d: the leader key is no longer this term's at revision %d", errLeaderKeyDeleted, e.cfg.Name, t.token.Epoch, resp.Header.Revision)
		t.end(err)
		return fmt.Errorf("election %q: proclaim: %w", e.cfg.Name, err)
	}
	t.log.Debug("proclaimed", "revision", resp.Header.Revision)
	e.observe1(Observation{Elected: true, Revision: resp.Header.Revision,
		Leader: Leader{ID: e.id, Value: value, Epoch: t.token.Epoch, Lease: e.session.Lease(), Key: t.key}})
	return nil
}

// Resign ends the term: it cancels the term's context first, then deletes
// the leader key if it is still this term's, which hands leadership to the
// next candidate at once. If the session has already ended, the key is left
// to the lease. Resign is idempotent and may be called concurrently; it
// returns etcd's error if the delete failed (the key then goes with the
// lease, or with a later Resign or Campaign).
func (t *Term) Resign(ctx context.Context) error { return t.resign(ctx, ErrResigned) }

// resign ends the term with cause and deletes its key, as Resign.
func (t *Term) resign(ctx context.Context, cause error) error {
	e := t.e
	if !e.holds(t) {
		return nil // released: resigned before, or the key is gone
	}
	t.cancel(cause)
	<-t.watchDone // the watch ends with the context, releasing t if the key is gone
	if !e.holds(t) {
		return nil
	}
	if e.session.Err() == nil {
		// Concurrent resigns send the same guarded delete: the first wins,
		// the others compare false, and a later term's key is never touched.
		if _, err := e.kv.Txn(ctx).If(t.Cmp()).Then(clientv3.OpDelete(t.key)).Commit(); err != nil {
			return fmt.Errorf("election %q: resign epoch %d: %w", e.cfg.Name, t.token.Epoch, err)
		}
	}
	e.release(t)
	return nil
}

// probeLease asks etcd, once the leader key was deleted, whether the
// session's lease still exists (Session.Check): a lease revoked or expired
// in etcd deletes the key too, and the session must then end now, not at
// its next renewal. Errors leave the session to its renewals.
func (e *Election) probeLease() {
	s := e.session
	ctx, cancel := clock.WithTimeout(s.Context(), e.cfg.Clock, min(e.cfg.ResignTimeout, renewAttemptTimeout))
	defer cancel()
	_ = s.Check(ctx)
}

// end ends the term with cause unless it has already ended.
func (t *Term) end(cause error) { t.cancel(cause) }

// watch ends the term when its key is deleted or replaced. It runs until the
// term ends.
func (t *Term) watch() {
	defer func() {
		// A term that ended while the session stands keeps its place in the
		// Election until Resign has deleted the key, unless the key is
		// already gone. Release before closing watchDone, so that Resign
		// sees it.
		deleted := errors.Is(context.Cause(t.ctx), errLeaderKeyDeleted)
		if deleted {
			t.e.probeLease()
		}
		if t.e.session.Err() != nil || deleted {
			t.e.release(t)
		}
		t.e.mu.Lock()
		t.ended = true
		live := t.live
		t.e.mu.Unlock()
		if live {
			t.e.termEnded(t)
		}
		close(t.watchDone)
	}()
	e := t.e
	rev := t.rev + 1
	_ = retry.Do(t.ctx, e.cfg.Clock, retry.Background(), func(int) (bool, error) {
		for wr := range e.w.Watch(watchstream.Own(t.ctx), t.key, clientv3.WithRev(rev)) {
			if wr.Canceled || wr.Err() != nil {
				break
			}
			for _, ev := range wr.Events {
				if ev.Type == mvccpb.DELETE || ev.Kv.CreateRevision != t.token.Epoch {
					t.end(fmt.Errorf("%w: election %q epoch %d at revision %d", errLeaderKeyDeleted, e.cfg.Name, t.token.Epoch, ev.Kv.ModRevision))
					return true, nil
				}
			}
		}
		if t.ctx.Err() != nil {
			return true, nil
		}
		// The watch ended (compaction, a broken stream): read the key and
		// watch again from there.
		resp, err := e.kv.Get(t.ctx, t.key)
		if err != nil {
			return false, err
		}
		if len(resp.Kvs) == 0 || resp.Kvs[0].CreateRevision != t.token.Epoch {
			t.end(fmt.Errorf("%w: election %q epoch %d by revision %d", errLeaderKeyDeleted, e.cfg.Name, t.token.Epoch, resp.Header.Revision))
			return true, nil
		}
		rev = resp.Header.Revision + 1
		return false, nil
	})
}
