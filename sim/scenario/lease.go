package scenario

import (
	"context"
	"fmt"

	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/tenure-go/tenure/election"
)

// expiryWithoutFencing: A takes the lock and reads, stalls past its lease
// (its client cut off for 3 TTLs), B takes the lock, reads and writes, then
// A resumes and writes what it computed. Off: etcd's concurrency.Mutex and
// an unfenced store (A's write lands: a lost update). On: tenure's election
// with an etcdfence.Store as Fencer (A's token is refused).
func expiryWithoutFencing(protected bool) (Outcome, error) {
	e, err := newEnv()
	if err != nil {
		return Outcome{}, err
	}
	defer e.close()
	ctx := e.ctx
	var out Outcome
	if !protected {
		ca, cb := e.client(), e.client()
		sa, err := concurrency.NewSession(e.etcdClient(ctx, ca), concurrency.WithTTL(int(ttl.Seconds())))
		if err != nil {
			return out, err
		}
		sb, err := concurrency.NewSession(e.etcdClient(ctx, cb), concurrency.WithTTL(int(ttl.Seconds())))
		if err != nil {
			return out, err
		}
		ma, mb := concurrency.NewMutex(sa, "/lock/k"), concurrency.NewMutex(sb, "/lock/k")
		if err := ma.Lock(ctx); err != nil {
			return out, err
		}
		e.rec.BeginTenure("lock/k", 1, "A", e.now())
		readA := e.readUnfenced("k")
		e.srv.Partition(ca.ID())
		e.sleep(3 * ttl)
		if err := mb.Lock(ctx); err != nil {
			return out, err
		}
		e.rec.BeginTenure("lock/k", 2, "B", e.now())
		e.incrUnfenced("k", "lock/k", 2, "B", e.readUnfenced("k"))
		_ = mb.Unlock(ctx)
		e.rec.EndTenure("lock/k", 2, "B", e.now())
		e.srv.Heal(ca.ID())
		e.incrUnfenced("k", "lock/k", 1, "A", readA)
		e.rec.EndTenure("lock/k", 1, "A", e.now())
		out.Notes = append(out.Notes, "A's write after its lease expired was accepted")
		out.Report, err = e.report(nil)
		return out, err
	}
	a, err := e.candidate(ctx, "A")
	if err != nil {
		return out, err
	}
	e.onClose(a.close)
	b, err := e.candidate(ctx, "B")
	if err != nil {
		return out, err
	}
	e.onClose(b.close)
	ta, err := a.el.Campaign(ctx)
	if err != nil {
		return out, err
	}
	e.rec.BeginTenure(ta.Token().Scope, ta.Token().Epoch, "A", e.now())
	readA, err := e.fencedRead(a.store, ta.Token(), "k")
	if err != nil {
		return out, err
	}
	e.srv.Partition(a.cli.ID())
	e.sleep(3 * ttl)
	tb, err := b.el.Campaign(ctx)
	if err != nil {
		return out, err
	}
	e.rec.EndTenure(ta.Token().Scope, ta.Token().Epoch, "A", e.now()) // A's term is over by now (its session's deadline passed)
	e.rec.BeginTenure(tb.Token().Scope, tb.Token().Epoch, "B", e.now())
	readB, err := e.fencedRead(b.store, tb.Token(), "k")
	if err != nil {
		return out, err
	}
	if err := e.fencedIncr(b.id, b.store, tb.Token(), "k", readB); err != nil {
		return out, err
	}
	e.srv.Heal(a.cli.ID())
	// A resumes: it does not look at its term before writing.
	if err := e.fencedIncr(a.id, a.store, ta.Token(), "k", readA); err != nil {
		return out, err
	}
	out.Notes = append(out.Notes, fmt.Sprintf("A's write under epoch %d refused after B's epoch %d", ta.Token().Epoch, tb.Token().Epoch))
	out.Report, err = e.report(e.finalFenced("k"))
	return out, err
}

// deadLeaseCampaign: A leads; B campaigns and waits; B's lease dies while
// it waits (revoked, as an expiry would); A resigns. Off: etcd's
// concurrency.Election returns from B's Campaign (B believes it leads on a
// dead lease), C campaigns and wins too, and both write. On: tenure's
// Campaign does not hand B a term; C wins alone.
func deadLeaseCampaign(protected bool) (Outcome, error) {
	e, err := newEnv()
	if err != nil {
		return Outcome{}, err
	}
	defer e.close()
	ctx := e.ctx
	var out Outcome
	admin := e.client()
	if !protected {
		var sess []*concurrency.Session
		var els []*concurrency.Election
		for range 3 {
			s, err := concurrency.NewSession(e.etcdClient(ctx, e.client()), concurrency.WithTTL(int(ttl.Seconds())))
			if err != nil {
				return out, err
			}
			sess = append(sess, s)
			els = append(els, concurrency.NewElection(s, "/election/k"))
		}
		if err := els[0].Campaign(ctx, "A"); err != nil {
			return out, err
		}
		bWon := make(chan error, 1)
		go func() { bWon <- els[1].Campaign(ctx, "B") }()
		e.sleep(100e6)
		if _, err := admin.Revoke(ctx, sess[1].Lease()); err != nil {
			return out, err
		}
		_ = els[0].Resign(ctx)
		if err := <-bWon; err != nil {
			out.Notes = append(out.Notes, "B's campaign failed: "+err.Error())
		} else {
			e.rec.BeginTenure("leader/k", els[1].Rev(), "B", e.now())
			out.Notes = append(out.Notes, fmt.Sprintf("B won on its dead lease (rev %d)", els[1].Rev()))
		}
		if err := els[2].Campaign(ctx, "C"); err != nil {
			return out, err
		}
		e.rec.BeginTenure("leader/k", els[2].Rev(), "C", e.now())
		e.incrUnfenced("k", "leader/k", els[2].Rev(), "C", e.readUnfenced("k"))
		if len(out.Notes) > 0 && els[1].Rev() > 0 {
			e.incrUnfenced("k", "leader/k", els[1].Rev(), "B", e.readUnfenced("k")-1)
		}
		out.Report, err = e.report(nil)
		return out, err
	}
	var cs []*candidate
	for _, id := range []string{"A", "B", "C"} {
		c, err := e.candidate(ctx, id)
		if err != nil {
			return out, err
		}
		e.onClose(c.close)
		cs = append(cs, c)
	}
	ta, err := cs[0].el.Campaign(ctx)
	if err != nil {
		return out, err
	}
	type won struct {
		t   *election.Term
		err error
	}
	bctx, bcancel := context.WithCancel(ctx)
	defer bcancel()
	bWon := make(chan won, 1)
	go func() {
		t, err := cs[1].el.Campaign(bctx)
		if t == nil {
			bWon <- won{nil, err}
			return
		}
		bWon <- won{t, err}
	}()
	e.sleep(100e6)
	if _, err := admin.Revoke(ctx, cs[1].sess.Lease()); err != nil {
		return out, err
	}
	_ = ta.Resign(ctx)
	tc, err := cs[2].el.Campaign(ctx)
	if err != nil {
		return out, err
	}
	e.rec.BeginTenure(tc.Token().Scope, tc.Token().Epoch, "C", e.now())
	rc, err := e.fencedRead(cs[2].store, tc.Token(), "k")
	if err != nil {
		return out, err
	}
	if err := e.fencedIncr(cs[2].id, cs[2].store, tc.Token(), "k", rc); err != nil {
		return out, err
	}
	e.sleep(ttl)
	bcancel()
	if w := <-bWon; w.err == nil && w.t != nil {
		out.Notes = append(out.Notes, fmt.Sprintf("B was handed a term (epoch %d)", w.t.Token().Epoch))
		e.rec.BeginTenure(tc.Token().Scope, w.t.Token().Epoch, "B", e.now())
	} else {
		out.Notes = append(out.Notes, fmt.Sprintf("B's campaign ended without a term: %v", w.err))
	}
	out.Report, err = e.report(e.finalFenced("k"))
	return out, err
}
