package election

import (
	"context"
	"errors"
	"fmt"

	clientv3 "go.etcd.io/etcd/client/v3"

	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/tenure-go/tenure/internal/clock"
	"github.com/tenure-go/tenure/internal/etcderr"
	"github.com/tenure-go/tenure/internal/retry"
	"github.com/tenure-go/tenure/internal/watchstream"
)

// Campaign enters the election and blocks until this candidate leads,
// advances every fencer of ElectionConfig.Fencers to the term's token, in
// order, and then returns its Term. It returns an error instead:
//
//   - wrapping the session's error (ErrSessionExpired, ErrLeaseLost,
//     ErrSessionClosed; all wrap ErrSessionDone) as soon as the session
//     ends, however the wait was going;
//   - wrapping ctx's error when ctx is done first; the candidacy is then
//     withdrawn;
//   - wrapping ErrFence and the fencer's error if a fencer fails; the term
//     won is resigned, so no leader key of this candidate remains;
//   - wrapping ErrAlreadyCampaigning if this Election already campaigns or
//     holds a term that has not ended;
//   - wrapping etcd's error if etcd fails a request;
//   - wrapping ErrElectionClosed once Close was called.
//
// Campaign never returns a Term whose session has ended or whose safe
// deadline has passed. If this candidate's key is deleted while it waits
// (by an operator), it enters again at the back of the queue.
func (e *Election) Campaign(ctx context.Context) (*Term, error) {
	if e.session == nil {
		return nil, fmt.Errorf("election %q: campaign: %w", e.cfg.Name, ErrNoSession)
	}
	// cctx ends with ctx or with Close.
	cctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	stop := context.AfterFunc(e.closing, func() { cancel(ErrElectionClosed) })
	defer stop()
	t, err := e.campaignTerm(cctx)
	if err == nil {
		return t, nil
	}
	switch {
	case e.session.Err() == nil && ctx.Err() == nil && e.closing.Err() != nil:
		return nil, fmt.Errorf("election %q: campaign: %w", e.cfg.Name, ErrElectionClosed)
	case ctx.Err() != nil && e.session.Err() == nil,
		errors.Is(err, ErrAlreadyCampaigning), errors.Is(err, ErrElectionClosed):
	default:
		e.met.campaignFailed()
	}
	return nil, err
}

// campaignTerm is Campaign once its context ends with Close too.
func (e *Election) campaignTerm(ctx context.Context) (*Term, error) {
	e.mu.Lock()
	prev := e.term
	if e.closed {
		e.mu.Unlock()
		return nil, fmt.Errorf("election %q: campaign: %w", e.cfg.Name, ErrElectionClosed)
	}
	if e.campaigning || (prev != nil && prev.ctx.Err() == nil) {
		e.mu.Unlock()
		return nil, fmt.Errorf("election %q: campaign: %w", e.cfg.Name, ErrAlreadyCampaigning)
	}
	e.campaigning = true
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.campaigning = false
		e.mu.Unlock()
	}()

	if prev != nil {
		// The last term has ended but may still hold its key: let it go
		// first, so that this campaign gets a new epoch.
		if err := prev.Resign(ctx); err != nil {
			return nil, e.campaignErr(ctx, err)
		}
	}
	t, err := e.campaign(ctx)
	if err != nil {
		return nil, err
	}
	e.mu.Lock()
	e.term = t
	e.mu.Unlock()
	go t.watch()
	if err := e.fence(ctx, t); err != nil {
		return nil, err
	}
	if err := e.handOut(ctx, t); err != nil {
		return nil, err
	}
	return t, nil
}

// handOut marks t, won and fenced, as the standing term that Campaign
// returns: Status and the metrics count it from now on, and its end is
// logged and measured. An Election closed meanwhile resigns it instead.
func (e *Election) handOut(ctx context.Context, t *Term) error {
	now := e.cfg.Clock.Now()
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		rctx, cancel := clock.WithTimeout(context.WithoutCancel(ctx), e.cfg.Clock, e.cfg.ResignTimeout)
		defer cancel()
		_ = t.resign(rctx, fmt.Errorf("%w: %w", ErrResigned, ErrElectionClosed))
		return fmt.Errorf("election %q: campaign: %w", e.cfg.Name, ErrElectionClosed)
	}
	t.live, t.since = true, now
	ended := t.ended
	e.mu.Unlock()
	e.met.won()
	t.log.Info("elected")
	e.observe1(Observation{Elected: true, Leader: Leader{ID: e.id, Value: e.cfg.Value, Epoch: t.token.Epoch, Lease: e.session.Lease(), Key: t.key}, Revision: t.rev})
	if ended { // the watch ended first: account for the end here
		e.termEnded(t)
	}
	return nil
}

// The reasons a term ended, as events and metrics tell them.
const (
	endResigned    = "resigned"
	endSessionLost = "session_lost"
	endKeyDeleted  = "key_deleted"
)

// endReason classifies the end of t. A deleted key whose lease etcd no
// longer has went with the session (probed by the watch, which then ended
// the session as expired or revoked: LossCause, the one classifier of a
// session's end), not with an operator.
func endReason(t *Term) string {
	cause := context.Cause(t.ctx)
	loss := LossCause(t.e.session.Err())
	switch {
	case errors.Is(cause, errLeaderKeyDeleted) && (loss == lossRevoked || loss == lossExpired):
		return endSessionLost
	case errors.Is(cause, errLeaderKeyDeleted):
		return endKeyDeleted
	case errors.Is(cause, ErrSessionDone):
		return endSessionLost
	}
	return endResigned
}

// termEnded logs and measures the end of a term that Campaign handed out.
// It runs once per such term, after both the hand-out and the end of the
// term's watch.
func (e *Election) termEnded(t *Term) {
	e.mu.Lock()
	since := t.since
	e.mu.Unlock()
	d := e.cfg.Clock.Since(since)
	cause := context.Cause(t.ctx)
	reason := endReason(t)
	e.met.termEnded(d, reason == endKeyDeleted)
	if reason == endResigned {
		t.log.Info("term ended", "reason", reason, "duration", d, "error", cause)
		return
	}
	t.log.Warn("term ended", "reason", reason, "duration", d, "error", cause)
}

// campaignErr maps err, the failure of a campaign step, to the error
// Campaign returns: the session's end takes precedence over ctx's.
func (e *Election) campaignErr(ctx context.Context, err error) error {
	if serr := e.session.Err(); serr != nil {
		return fmt.Errorf("election %q: campaign: %w", e.cfg.Name, serr)
	}
	if cerr := ctx.Err(); cerr != nil {
		return fmt.Errorf("election %q: campaign: %w", e.cfg.Name, cerr)
	}
	return fmt.Errorf("election %q: campaign: %w", e.cfg.Name, err)
}

func (e *Election) campaign(ctx context.Context) (*Term, error) {
	s := e.session
	if err := s.Err(); err != nil {
		return nil, e.campaignErr(ctx, err)
	}
	// cctx ends with ctx or with the session, whichever comes first.
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := context.AfterFunc(s.Context(), cancel)
	defer stop()

	for {
		epoch, err := e.enter(cctx)
		if err != nil {
			if etcderr.LeaseNotFound(err) {
				s.missing(err)
			}
			// The put may have landed although its answer was lost.
			e.withdraw(0)
			return nil, e.campaignErr(ctx, err)
		}
		won, rev, err := e.wait(cctx, epoch)
		if err != nil {
			e.withdraw(epoch)
			return nil, e.campaignErr(ctx, err)
		}
		if !won {
			e.log.Warn("candidate key deleted while campaigning; entering again", "epoch", epoch)
			continue
		}
		// Never win with a dead lease: the session must still stand, with
		// its safe deadline ahead.
		if err := s.Err(); err != nil {
			return nil, e.campaignErr(ctx, err) // the key goes with the lease
		}
		if now, dl := e.cfg.Clock.Now(), s.safeDeadline(); !now.Before(dl) {
			e.withdraw(epoch)
			return nil, fmt.Errorf("election %q: campaign: %w: won at %v past the safe deadline", e.cfg.Name, ErrSessionExpired, now.Sub(dl))
		}
		t := newTerm(e, epoch, rev)
		if t.ctx.Err() != nil { // the session ended a moment ago
			return nil, e.campaignErr(ctx, s.Err())
		}
		return t, nil
	}
}

// enter creates this candidate's key unless it exists, and returns its
// create revision. An existing key of this lease (left by an earlier
// candidacy) keeps its place and gets the current value.
func (e *Election) enter(ctx context.Context) (int64, error) {
	lease := e.session.Lease()
	resp, err := e.kv.Txn(ctx).
		If(clientv3.Compare(clientv3.CreateRevision(e.key), "=", 0)).
		Then(clientv3.OpPut(e.key, e.value, clientv3.WithLease(lease))).
		Else(clientv3.OpGet(e.key)).
		Commit()
	if err != nil {
		return 0, err
	}
	if resp.Succeeded {
		return resp.Header.Revision, nil
	}
	kvs := resp.Responses[0].GetResponseRange().Kvs
	if len(kvs) == 0 {
		return 0, errors.New("candidate key vanished inside a transaction")
	}
	kv := kvs[0]
	if string(kv.Value) != e.value || clientv3.LeaseID(kv.Lease) != lease {
		u, err := e.kv.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(e.key), "=", kv.CreateRevision)).
			Then(clientv3.OpPut(e.key, e.value, clientv3.WithLease(lease))).
			Commit()
		if err != nil {
			return 0, err
		}
		if !u.Succeeded {
			return e.enter(ctx)
		}
	}
	return kv.CreateRevision, nil
}

// wait blocks until no key created before epoch remains (won), or this
// candidate's own key is gone (not won, no error). It returns the revision
// at which it decided.
func (e *Election) wait(ctx context.Context, epoch int64) (won bool, rev int64, err error) {
	err = retry.Do(ctx, e.cfg.Clock, retry.Background(), func(int) (bool, error) {
		resp, err := e.kv.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(e.key), "=", epoch)).
			Then(clientv3.OpGet(e.prefix, append(clientv3.WithLastCreate(), clientv3.WithMaxCreateRev(epoch-1))...)).
			Commit()
		if err != nil {
			return true, err
		}
		rev = resp.Header.Revision
		if !resp.Succeeded {
			return true, nil
		}
		if len(resp.Responses[0].GetResponseRange().Kvs) == 0 {
			won = true
			return true, nil
		}
		// Someone created before us still stands. Any deletion under the
		// prefix (a predecessor's or our own) calls for another look.
		if e.waitDelete(ctx, rev+1) {
			return false, nil
		}
		if err := ctx.Err(); err != nil {
			return true, err
		}
		// The watch ended without a deletion (compaction, a closed stream):
		// look again, without spinning.
		return false, errWatchEnded
	})
	if err != nil {
		return false, 0, err
	}
	return won, rev, nil
}

// waitDelete watches the prefix from rev and reports whether a deletion was
// seen before the watch ended.
func (e *Election) waitDelete(ctx context.Context, rev int64) bool {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for wr := range e.w.Watch(watchstream.Own(wctx), e.prefix, clientv3.WithPrefix(), clientv3.WithRev(rev)) {
		if wr.Canceled || wr.Err() != nil {
			return false
		}
		for _, ev := range wr.Events {
			if ev.Type == mvccpb.DELETE {
				return true
			}
		}
	}
	return false
}

// withdraw deletes this candidate's key if it still has the given create
// revision (any key of this lease if epoch is 0), bounded by the resign
// timeout and by the session. A key whose session has ended is left to its
// lease.
func (e *Election) withdraw(epoch int64) {
	s := e.session
	if s.Err() != nil {
		return
	}
	ctx, cancel := clock.WithTimeout(s.Context(), e.cfg.Clock, e.cfg.ResignTimeout)
	defer cancel()
	cmp := clientv3.Compare(clientv3.CreateRevision(e.key), "=", epoch)
	if epoch == 0 {
		cmp = clientv3.Compare(clientv3.LeaseValue(e.key), "=", s.Lease())
	}
	_, err := e.kv.Txn(ctx).If(cmp).Then(clientv3.OpDelete(e.key)).Commit()
	if err != nil {
		e.log.Warn("could not withdraw candidacy; the key goes with the lease", "error", err)
	}
}

// release forgets t once it has ended and let go of its key: the Election
// may campaign again.
func (e *Election) release(t *Term) {
	e.mu.Lock()
	if e.term == t {
		e.term = nil
	}
	e.mu.Unlock()
}

// holds reports whether t is still this Election's term: ended or not, it
// has not been released.
func (e *Election) holds(t *Term) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.term == t
}
