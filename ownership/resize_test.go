package ownership

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestResizeReadersAgreeAtEachRevision splits a fleet of 16 partitions
// into 64 and merges it back, a group at a time, while sampling every
// node's routing view and an Observer's: whenever a node's view and the
// Observer's are at the same revision, they name the same partition and,
// for a claimed one, the same holder and epoch for every sampled key (a
// node routes a partition it holds but no longer serves, one it hands
// off, to the next owner, and knows its own new claims from its
// transactions before its watch brings them; those are not compared).
func TestResizeReadersAgreeAtEachRevision(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	const name = "resize-agree"
	nodes := []*Node{join(t, cli, testConfig(t, name, "a", 16)), join(t, c.NewClient(t), testConfig(t, name, "b", 16))}
	require.NoError(t, waitFor(20*time.Second, func() error { return stableErr(nodes) }, nodes...))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	obs, err := fleet.Observe(ctx, cli, fleet.ObserverConfig{Cluster: name, Ring: ring.Config{Partitions: 16, LoadFactor: 1.25}})
	require.NoError(t, err)
	t.Cleanup(obs.Close)
	op, err := fleet.NewOperator(cli, fleet.OperatorConfig{Cluster: name})
	require.NoError(t, err)
	keys := make([]string, 128)
	for i := range keys {
		keys[i] = fmt.Sprintf("key-%d", i)
	}

	// agreeAt compares n's view with the Observer's if both are at one
	// revision; it returns that revision (0: not comparable now).
	agreeAt := func(n *Node) (int64, error) {
		s, rev := n.snap.Load(), obs.Revision()
		if s.rev != rev {
			return 0, nil
		}
		for _, key := range keys {
			rn, ro := s.route(s.shape.Of(key)), obs.Lookup(key)
			if obs.Revision() != rev {
				return 0, nil
			}
			switch {
			case ro.Owner == n.ID() && !rn.Local && rn.Partition == ro.Partition:
				continue // its own claim, not served: it routes to the next owner (entry.unserved)
			case rn.Owner == n.ID() && rn.Epoch > rev && rn.Partition == ro.Partition:
				continue // its own claim, known from its transaction before the watch brings it
			}
			if rn.Partition != ro.Partition || rn.Epoch != ro.Epoch || (ro.Epoch != 0 && rn.Owner != ro.Owner) {
				return rev, fmt.Errorf("at revision %d, %s: %s names %d %s@%d, the observer %d %s@%d", rev, key, n.ID(),
					rn.Partition, rn.Owner, rn.Epoch, ro.Partition, ro.Owner, ro.Epoch)
			}
		}
		return rev, nil
	}
	for _, to := range []int{64, 16} {
		var (
			wg    sync.WaitGroup
			done  = make(chan struct{})
			first error
			revs  = map[int64]bool{}
		)
		wg.Go(func() {
			for {
				for _, n := range nodes {
					rev, err := agreeAt(n)
					if err != nil && first == nil {
						first = err
					}
					if rev != 0 {
						revs[rev] = true
					}
				}
				select {
				case <-done:
					return
				default:
				}
			}
		})
		rep, err := op.Resize(ctx, to, fleet.ResizeOptions{Actor: "t", Reason: "agree", Budget: 2})
		close(done)
		wg.Wait()
		require.NoError(t, err)
		require.True(t, rep.Completed)
		require.NoError(t, first)
		t.Logf("resize to %d: took %v; nodes and the Observer compared at %d revisions", to, time.Duration(rep.Took).Round(time.Millisecond), len(revs))
		require.NoError(t, waitFor(20*time.Second, func() error {
			for _, n := range nodes {
				if p := n.Ring().Partitions(); p != to {
					return fmt.Errorf("%s uses %d partitions", n.ID(), p)
				}
			}
			return stableErr(nodes)
		}, nodes...))
	}
}

// TestResizeWithPrepareTellsTheCount splits a fleet of 8 partitions into
// 32 and merges it back, with a prepare phase whose warm timeout is an
// hour: a partition a resize asks to move is released at once (nobody
// claims it again, so nobody prepares it), or the resize would wait out
// the timeout at every step. Every OnAcquired and OnPrepare tells the
// partition count its partition counts by: the target count for a
// partition a resize created.
func TestResizeWithPrepareTellsTheCount(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	const name = "resize-prepare"
	var (
		mu     sync.Mutex
		counts = map[int]map[int]int{} // count -> partition -> OnAcquired events
		bad    []string
	)
	config := func(id string) Config {
		cfg := testConfig(t, name, id, 8)
		cfg.WarmTimeout = time.Hour
		cfg.Callbacks = Callbacks{
			OnPrepare: func(e Event) error {
				if e.Partitions <= e.Partition {
					mu.Lock()
					bad = append(bad, fmt.Sprintf("prepare %d of %d", e.Partition, e.Partitions))
					mu.Unlock()
				}
				return nil
			},
			OnAcquired: func(e Event) {
				mu.Lock()
				defer mu.Unlock()
				if counts[e.Partitions] == nil {
					counts[e.Partitions] = map[int]int{}
				}
				counts[e.Partitions][e.Partition]++
			},
		}
		return cfg
	}
	nodes := []*Node{join(t, cli, config("a")), join(t, c.NewClient(t), config("b"))}
	require.NoError(t, waitFor(20*time.Second, func() error { return stableErr(nodes) }, nodes...))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	op, err := fleet.NewOperator(cli, fleet.OperatorConfig{Cluster: name})
	require.NoError(t, err)
	for _, to := range []int{32, 8} {
		mu.Lock()
		clear(counts)
		mu.Unlock()
		rep, err := op.Resize(ctx, to, fleet.ResizeOptions{Actor: "t", Reason: "prepare", Budget: 2})
		require.NoError(t, err)
		require.True(t, rep.Completed)
		require.NoError(t, waitFor(20*time.Second, func() error { return stableErr(nodes) }, nodes...))
		mu.Lock()
		require.Empty(t, bad)
		require.Len(t, counts, 1, "OnAcquired told one count during the resize to %d: %v", to, counts)
		require.Len(t, counts[to], to, "every partition of %d acquired, by the count %d: %v", to, to, counts)
		mu.Unlock()
	}
}
