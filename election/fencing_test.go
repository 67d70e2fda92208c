package election_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/sim/cluster"
)

// counterStore returns a fenced store for the counter test of election
// name: its floors under the test fleet's fence prefix, as an election's
// fencer must keep them (each election's scope is its own), its data
// under a prefix of its own.
func counterStore(t *testing.T, cli *clientv3.Client, name string) *etcdfence.Store {
	t.Helper()
	st, err := etcdfence.New(cli, etcdfence.Config{Cluster: testCluster, Prefix: "/app/" + name + "/"})
	require.NoError(t, err)
	return st
}

// increment is a leader's read-modify-write of a counter under tok: it
// reads, calls pause with the value read, and writes the value plus one.
func increment(ctx context.Context, st *etcdfence.Store, tok fence.Token, pause func(v int)) error {
	it, err := st.Get(ctx, tok, "counter")
	if err != nil {
		return err
	}
	v := 0
	if it.Exists() {
		if v, err = strconv.Atoi(string(it.Value)); err != nil {
			return err
		}
	}
	pause(v)
	_, err = st.Put(ctx, tok, "counter", []byte(strconv.Itoa(v+1)))
	return err
}

// pausedIncrement runs increment in the background: it reports the value
// read on read and waits for resume before writing; done receives the
// write's outcome.
type pausedIncrement struct {
	read   chan int
	resume chan struct{}
	done   chan error
}

func startIncrement(ctx context.Context, st *etcdfence.Store, tok fence.Token) pausedIncrement {
	p := pausedIncrement{read: make(chan int, 1), resume: make(chan struct{}), done: make(chan error, 1)}
	go func() {
		p.done <- increment(ctx, st, tok, func(v int) {
			p.read <- v
			<-p.resume
		})
	}()
	return p
}

// TestFencersPreventLostUpdate runs the interleaving that loses an update
// when a new leader reads before its first write: the old leader reads the
// counter and pauses; its lease is revoked and the next candidate is
// elected; the new leader reads; the old leader resumes and writes; the new
// leader writes. With the store as the election's fencer, the new term
// raised the floor before Campaign returned, so the old leader's write is
// refused and no acknowledged increment is lost. Without it (the control),
// both writes are acknowledged and the counter shows one: the check sees
// the loss.
func TestFencersPreventLostUpdate(t *testing.T) {
	c := cluster.New(t, 1)
	admin := c.NewClient(t)
	for _, fenced := range []bool{true, false} {
		t.Run(fmt.Sprintf("fenced=%v", fenced), func(t *testing.T) {
			ctx := testCtx(t)
			name := fmt.Sprintf("counter-%v", fenced)
			cli1, cli2 := c.NewClient(t), c.NewClient(t)
			st1, st2 := counterStore(t, cli1, name), counterStore(t, cli2, name)
			cfg := func(id string, st *etcdfence.Store) election.ElectionConfig {
				cfg := election.ElectionConfig{Cluster: testCluster, Name: name, ID: id}
				if fenced {
					cfg.Fencers = []fence.Fencer{st}
				}
				return cfg
			}
			s1 := newSession(t, cli1, shortTTL)
			e1, err := election.NewElection(s1, cli1, cli1, cfg("n1", st1))
			require.NoError(t, err)
			e2, err := election.NewElection(newSession(t, cli2, shortTTL), cli2, cli2, cfg("n2", st2))
			require.NoError(t, err)
			t1, err := e1.Campaign(ctx)
			require.NoError(t, err)
			res := campaignAsync(ctx, e2)
			waitCandidates(t, admin, e1, 2)

			old := startIncrement(ctx, st1, t1.Token())
			assert.Equal(t, 0, recv(t, old.read, "the old leader's read"))

			// The old leader's lease is revoked while it is paused (as after
			// a pause longer than its TTL): its key goes, n2 is elected.
			_, err = admin.Revoke(ctx, s1.Lease())
			require.NoError(t, err)
			r := recv(t, res, "the new leader")
			require.NoError(t, r.err)
			t2 := r.term
			require.Greater(t, t2.Token().Epoch, t1.Token().Epoch)
			floor, err := st2.Floor(ctx, t2.Token().Scope)
			require.NoError(t, err)
			if fenced {
				assert.Equal(t, t2.Token().Epoch, floor, "Campaign returns after the floor was raised")
			} else {
				assert.Equal(t, int64(0), floor, "without fencers nobody raised the floor")
			}

			cur := startIncrement(ctx, st2, t2.Token())
			assert.Equal(t, 0, recv(t, cur.read, "the new leader's read"))
			close(old.resume)
			oldErr := recv(t, old.done, "the old leader's write")
			close(cur.resume)
			curErr := recv(t, cur.done, "the new leader's write")
			require.NoError(t, curErr)

			acked := 1
			if oldErr == nil {
				acked++
			}
			got, err := admin.Get(ctx, "/app/"+name+"/counter")
			require.NoError(t, err)
			require.Len(t, got.Kvs, 1)
			final, err := strconv.Atoi(string(got.Kvs[0].Value))
			require.NoError(t, err)
			lost := acked - final
			if fenced {
				assert.ErrorIs(t, oldErr, fence.ErrStale, "the old leader's write must be refused")
				assert.Equal(t, 0, lost, "lost updates")
				assert.Equal(t, 1, final)
			} else {
				require.NoError(t, oldErr, "control: without fencers the old leader's write lands")
				assert.Equal(t, 1, lost, "control: the unfenced interleaving loses an acknowledged increment")
			}
			require.NoError(t, t2.Resign(ctx))
		})
	}
}

// fenceLog records the fencers' calls and the hooks' in order.
type fenceLog struct {
	mu     sync.Mutex
	events []string
}

func (l *fenceLog) add(format string, args ...any) {
	l.mu.Lock()
	l.events = append(l.events, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

func (l *fenceLog) take() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	ev := l.events
	l.events = nil
	return ev
}

// recorder returns a fencer that logs its calls as "<name> <epoch>" and
// fails with fail() when that is not nil.
func (l *fenceLog) recorder(name string, fail func() error) fence.Fencer {
	return fence.FencerFunc(func(ctx context.Context, tok fence.Token) error {
		if fail != nil {
			if err := fail(); err != nil {
				l.add("%s %d failed", name, tok.Epoch)
				return err
			}
		}
		l.add("%s %d", name, tok.Epoch)
		return nil
	})
}

// TestFencerFailureResigns: a failing fencer makes Campaign return an error
// wrapping ErrFence and the fencer's error, the fencers after it are not
// called, and no key of the candidate remains in etcd. The Election then
// campaigns again with a new epoch.
func TestFencerFailureResigns(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	ctx := testCtx(t)
	s := newSession(t, cli, shortTTL)
	boom := errors.New("store unreachable")
	var failing atomic.Bool
	failing.Store(true)
	var log fenceLog
	e, err := election.NewElection(s, cli, cli, election.ElectionConfig{
		Cluster: testCluster, Name: "fencefail", ID: "n1",
		Fencers: []fence.Fencer{
			log.recorder("f0", nil),
			log.recorder("f1", func() error {
				if failing.Load() {
					return boom
				}
				return nil
			}),
			log.recorder("f2", nil),
		},
	})
	require.NoError(t, err)

	term, err := e.Campaign(ctx)
	require.Error(t, err)
	assert.Nil(t, term)
	assert.ErrorIs(t, err, election.ErrFence)
	assert.ErrorIs(t, err, boom)
	assert.NotErrorIs(t, err, election.ErrSessionDone)
	ev := log.take()
	require.Len(t, ev, 2, "f2 must not run after f1 failed: %v", ev)
	var epoch int64
	_, err = fmt.Sscanf(ev[0], "f0 %d", &epoch)
	require.NoError(t, err)
	assert.Equal(t, []string{fmt.Sprintf("f0 %d", epoch), fmt.Sprintf("f1 %d failed", epoch)}, ev)

	got, err := cli.Get(ctx, e.Prefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	assert.Zero(t, got.Count, "no leader key may remain after a fencer failed")
	_, err = e.Leader(ctx)
	assert.ErrorIs(t, err, election.ErrNoLeader)
	require.NoError(t, s.Err(), "the session stands")

	failing.Store(false)
	term, err = e.Campaign(ctx)
	require.NoError(t, err)
	assert.Greater(t, term.Token().Epoch, epoch)
	e2 := term.Token().Epoch
	assert.Equal(t, []string{fmt.Sprintf("f0 %d", e2), fmt.Sprintf("f1 %d", e2), fmt.Sprintf("f2 %d", e2)}, log.take())
	require.NoError(t, term.Resign(ctx))
}

// TestForcedDeletionFencesNextTerm: an operator deletes the leader key (a
// force release). Run's next term advances the fencers to its own token
// before OnElected and fn, as the first did; the store then refuses the
// first term's token.
func TestForcedDeletionFencesNextTerm(t *testing.T) {
	c := cluster.New(t, 1)
	cli, admin := c.NewClient(t), c.NewClient(t)
	ctx := testCtx(t)
	s := newSession(t, cli, shortTTL)
	st := counterStore(t, cli, "forced")
	var log fenceLog
	var fails atomic.Int32
	fails.Store(2) // the second term's first two attempts fail: Run retries
	flaky := func() error {
		if log.count() > 0 && fails.Add(-1) >= 0 {
			return errors.New("flaky store")
		}
		return nil
	}
	hooks := &election.Hooks{
		OnElected: func(_ context.Context, tok fence.Token) {
			floor, err := st.Floor(ctx, tok.Scope)
			log.add("elected %d floor %d err %v", tok.Epoch, floor, err)
		},
	}
	e, err := election.NewElection(s, cli, cli, election.ElectionConfig{
		Cluster: testCluster, Name: "forced", ID: "n1",
		Fencers: []fence.Fencer{st, log.recorder("rec", flaky)},
		Hooks:   hooks,
	})
	require.NoError(t, err)

	terms := make(chan fence.Token, 2)
	runCtx, stop := context.WithCancel(ctx)
	runErr := make(chan error, 1)
	go func() {
		runErr <- e.Run(runCtx, func(ctx context.Context, tok fence.Token) error {
			terms <- tok
			<-ctx.Done()
			return nil
		})
	}()
	first := recv(t, terms, "the first term")
	l, err := e.Leader(ctx)
	require.NoError(t, err)
	_, err = admin.Delete(ctx, l.Key) // the operator's force release
	require.NoError(t, err)
	second := recv(t, terms, "the second term")
	require.Greater(t, second.Epoch, first.Epoch)
	stop()
	assert.ErrorIs(t, recv(t, runErr, "Run to return"), context.Canceled)

	// Each failed attempt resigned the key it had won, so the second term's
	// epoch is the third won after the deletion.
	ev := log.take()
	require.Len(t, ev, 6, "first term, two failed attempts, second term: %v", ev)
	assert.Equal(t, fmt.Sprintf("rec %d", first.Epoch), ev[0])
	assert.Equal(t, fmt.Sprintf("elected %d floor %d err <nil>", first.Epoch, first.Epoch), ev[1])
	assert.Regexp(t, `^rec \d+ failed$`, ev[2])
	assert.Regexp(t, `^rec \d+ failed$`, ev[3])
	assert.Equal(t, fmt.Sprintf("rec %d", second.Epoch), ev[4])
	assert.Equal(t, fmt.Sprintf("elected %d floor %d err <nil>", second.Epoch, second.Epoch), ev[5],
		"OnElected runs after the store's floor was raised to the new term")

	_, err = st.Put(ctx, first, "counter", []byte("zombie"))
	assert.ErrorIs(t, err, fence.ErrStale, "the first term's token is fenced out")
}

func (l *fenceLog) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.events)
}
