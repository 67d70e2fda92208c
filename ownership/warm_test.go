package ownership

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/sim/cluster"
)

// TestPrepareWhileStarting shows that a partition the ring gives to a node
// that joins while its holder is still starting it (OnAcquired has not
// returned: a rolling restart gives a node the leaving process's
// partitions a moment before that process comes back) is let go only once
// the successor is ready: the successor's OnAcquired says it was
// prepared, and the holder released it after the successor prepared it.
// Without the wait, the holder released it at once and the successor,
// which had begun to prepare, claimed it cold.
func TestPrepareWhileStarting(t *testing.T) {
	c := cluster.New(t, 1)
	const name, parts = "warm-starting", 4
	p := movingPartition(t, parts, []string{"a"}, "a", "b")
	tl := newTimeline()
	never := make(chan struct{})
	var returned atomic.Bool
	cfgA := testConfig(t, name, "a", parts)
	cfgA.WarmTimeout = time.Minute
	cfgA.AcquiredTimeout = time.Hour // a starts p until p moves: only its move ends OnAcquired
	cfgA.Callbacks = blockingAcquired(tl, "a", never, func(e Event) bool { return e.Partition == p }, &returned)
	a := join(t, c.NewClient(t), cfgA)
	e1 := epochOf(t, tl, "a", p)

	release := make(chan struct{})
	cfgB := testConfig(t, name, "b", parts)
	cfgB.WarmTimeout = time.Minute
	cfgB.Callbacks = tl.callbacks("b", func(e Event) error {
		if e.Partition != p {
			return nil
		}
		select {
		case <-release:
			return nil
		case <-e.Context.Done():
			return context.Cause(e.Context)
		}
	})
	b := join(t, c.NewClient(t), cfgB)
	tl.wait(t, fmt.Sprintf("b prepare %d from a", p))
	close(release)
	tl.wait(t, fmt.Sprintf("b prepared %d", p))

	waitStable(t, 30*time.Second, a, b)
	e := tl.acquired("b", p)
	require.False(t, e.Prepared.IsZero(), "b claimed %d cold: %q", p, tl.entries)
	released := tl.index(fmt.Sprintf("a released %d@%s moved", p, e1))
	require.Greater(t, released, tl.index(fmt.Sprintf("b prepared %d", p)), "a let %d go before b was ready: %q", p, tl.entries)
	require.True(t, returned.Load())
}
