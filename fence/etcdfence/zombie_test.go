package etcdfence_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/fence/internal/fencetest"
	"github.com/tenure-go/tenure/sim/cluster"
)

// writer is what the zombie scenario writes through: a Store or a Batcher.
type writer interface {
	Put(ctx context.Context, t fence.Token, key string, value []byte) (int64, error)
	Delete(ctx context.Context, t fence.Token, key string) (bool, error)
	CompareAndSwap(ctx context.Context, t fence.Token, key string, version int64, value []byte) (int64, error)
}

// commitWriter writes through Store.Commit, one batch per call.
type commitWriter struct{ s *etcdfence.Store }

func (c commitWriter) do(ctx context.Context, w etcdfence.Write) etcdfence.Result {
	res, err := c.s.Commit(ctx, []etcdfence.Write{w, {Kind: etcdfence.KindPut, Token: fence.Token{Scope: "bystander", Epoch: 1}, Key: "bystander", Value: []byte("x")}})
	if err != nil {
		return etcdfence.Result{Err: err}
	}
	return res[0]
}

func (c commitWriter) Put(ctx context.Context, t fence.Token, key string, value []byte) (int64, error) {
	r := c.do(ctx, etcdfence.Write{Kind: etcdfence.KindPut, Token: t, Key: key, Value: value})
	return r.Revision, r.Err
}

func (c commitWriter) Delete(ctx context.Context, t fence.Token, key string) (bool, error) {
	r := c.do(ctx, etcdfence.Write{Kind: etcdfence.KindDelete, Token: t, Key: key})
	return r.Deleted, r.Err
}

func (c commitWriter) CompareAndSwap(ctx context.Context, t fence.Token, key string, version int64, value []byte) (int64, error) {
	r := c.do(ctx, etcdfence.Write{Kind: etcdfence.KindCompareAndSwap, Token: t, Key: key, Version: version, Value: value})
	return r.Revision, r.Err
}

// TestZombie: owner A (epoch e1) is paused; owner B (e2 > e1) raises the
// floor and writes; A resumes and writes to a key B never touched and to
// B's key: both refused, and B's data is intact. A and B run in separate
// Stores over separate clients, as separate processes would, so A's
// refusals come from etcd, not from anything B's Store remembers. Run
// through every write path of the store.
func TestZombie(t *testing.T) {
	c := cluster.New(t, 1)
	cliA, cliB := c.NewClient(t), c.NewClient(t)
	for _, path := range []string{"store", "commit", "batcher"} {
		t.Run(path, func(t *testing.T) {
			s := newStore(t, cliA, "zombie-"+path)
			sB := newStore(t, cliB, "zombie-"+path)
			var w writer = s
			switch path {
			case "commit":
				w = commitWriter{s}
			case "batcher":
				b, err := etcdfence.NewBatcher(s, etcdfence.BatcherConfig{})
				require.NoError(t, err)
				defer b.Close()
				w = b
			}
			zombie(t, cliB, s, w, sB, "/test/zombie-"+path+"/claims/3")
		})
	}
}

// zombie runs the scenario: A writes through w (over s), B through sB.
func zombie(t *testing.T, cli *clientv3.Client, s *etcdfence.Store, w writer, sB *etcdfence.Store, claim string) {
	ctx := fencetest.Context(t)
	scope := fence.PartitionScope(3)
	a := fence.Token{Scope: scope, Epoch: claimEpoch(t, cli, claim)}
	require.NoError(t, s.Advance(ctx, a))
	_, err := w.Put(ctx, a, "a-key", []byte("written by A"))
	require.NoError(t, err)

	type outcome struct {
		name string
		err  error
	}
	paused, resume := make(chan struct{}), make(chan struct{})
	results := make(chan []outcome, 1)
	go func() { // owner A: pauses (GC, SIGSTOP...) past the end of its tenure
		close(paused)
		<-resume
		var out []outcome
		_, err := w.Put(ctx, a, "fresh-key", []byte("zombie"))
		out = append(out, outcome{"put to a key B never touched", err})
		_, err = w.Put(ctx, a, "b-key", []byte("zombie"))
		out = append(out, outcome{"put to B's key", err})
		_, err = w.CompareAndSwap(ctx, a, "b-key", 1, []byte("zombie"))
		out = append(out, outcome{"compare-and-swap on B's key", err})
		_, err = w.Delete(ctx, a, "b-key")
		out = append(out, outcome{"delete of B's key", err})
		_, err = w.Delete(ctx, a, "a-key")
		out = append(out, outcome{"delete of its own old key", err})
		_, err = s.Get(ctx, a, "b-key")
		out = append(out, outcome{"read", err})
		out = append(out, outcome{"advance", s.Advance(ctx, a)})
		results <- out
	}()
	<-paused

	// A's claim expires; B claims the partition, raises the floor, writes.
	b := fence.Token{Scope: scope, Epoch: claimEpoch(t, cli, claim)}
	require.Greater(t, b.Epoch, a.Epoch)
	require.NoError(t, sB.Advance(ctx, b))
	_, err = sB.Put(ctx, b, "b-key", []byte("written by B"))
	require.NoError(t, err)

	close(resume)
	for _, o := range <-results {
		t.Run(o.name, func(t *testing.T) { fencetest.RequireStale(t, o.err, scope, a.Epoch, b.Epoch) })
	}

	for key, want := range map[string]string{"b-key": "written by B", "a-key": "written by A"} {
		it, err := sB.Get(ctx, b, key)
		require.NoError(t, err)
		require.Equal(t, want, string(it.Value), key)
		require.Equal(t, int64(1), it.Version, "%s written exactly once", key)
	}
	it, err := sB.Get(ctx, b, "fresh-key")
	require.NoError(t, err)
	require.False(t, it.Exists(), "the zombie's write to an untouched key did not land")
	floor, err := sB.Floor(ctx, scope)
	require.NoError(t, err)
	require.Equal(t, b.Epoch, floor)
}
