package fleet_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestResizeSplitAndMerge: a fleet of 8 partitions split to 32 and merged
// back to 8 while it serves. A dry run reports the resize's size and
// writes nothing. During each resize, at sampled revisions, the Observer
// names for every sampled key the partition, holder and epoch etcd held
// at its revision (as the Operator reads them there); after it, the
// nodes, the Observer and the Operator agree. A process configured with
// the count before a resize is refused, the error naming the fleet's
// count (and, during a resize, the count it moves to); with AdoptSpec a
// node joins.
func TestResizeSplitAndMerge(t *testing.T) {
	c := cluster.New(t, 1)
	f := newResizeFleet(t, c, "resize", 8, "a", "b")
	ctx := opCtx(t)

	dry, err := f.op.Resize(ctx, 32, fleet.ResizeOptions{Actor: "t", Reason: "dry", Budget: 3, DryRun: true})
	require.NoError(t, err)
	require.Equal(t, fleet.ResizeReport{From: 8, To: 32, Budget: 3, Groups: 8, Moves: 40, Steps: 3, DryRun: true, ID: dry.ID,
		Partitions: 8, Revision: dry.Revision, By: "t", Reason: "dry", Started: dry.Started}, dry)
	st, err := f.op.ResizeStatus(ctx)
	require.NoError(t, err)
	require.False(t, st.InProgress, "a dry run writes nothing")

	for _, step := range []struct{ from, to int }{{8, 32}, {32, 8}} {
		samples, err := f.sampleWhile(ctx, func() error {
			rep, err := f.op.Resize(ctx, step.to, fleet.ResizeOptions{Actor: "t", Reason: "resize", Budget: 1})
			if err == nil && !rep.Completed {
				err = errors.New("not completed")
			}
			t.Logf("resize to %d: took %v, %d driver writes", step.to, time.Duration(rep.Took).Round(time.Millisecond), rep.Writes)
			return err
		})
		require.NoError(t, err)
		t.Logf("%d samples of the Observer at its revision during the resize", samples)
		f.waitSettled(t, step.to)

		_, err = fleet.Observe(ctx, f.obsClient, fleet.ObserverConfig{Cluster: f.name, Ring: ring.Config{Partitions: step.from, LoadFactor: 1.25}})
		require.ErrorIs(t, err, ring.ErrSpecMismatch)
		require.ErrorContains(t, err, "the partition count changes only by a resize")
		_, err = ownership.Join(ctx, f.obsClient, testConfig(t, f.name, "late", step.from))
		require.ErrorIs(t, err, ring.ErrSpecMismatch)
	}

	// During a resize, the error names the count it moves to.
	_, err = f.op.Resize(ctx, 16, fleet.ResizeStopping(fleet.ResizeOptions{Actor: "t", Reason: "stop"}, stopAt("start", 1)))
	require.ErrorIs(t, err, fleet.ErrResizeStopped)
	_, err = fleet.Observe(ctx, f.obsClient, fleet.ObserverConfig{Cluster: f.name, Ring: ring.Config{Partitions: 16, LoadFactor: 1.25}})
	require.ErrorIs(t, err, ring.ErrSpecMismatch)
	require.ErrorContains(t, err, "partitions 16 here, 8, resizing to 16 in the fleet")
	cfg := testConfig(t, f.name, "adopter", 16)
	cfg.AdoptSpec = true
	late := join(t, f.obsClient, cfg)
	f.nodes = append(f.nodes, late)
	_, err = f.op.Resize(ctx, 16, fleet.ResizeOptions{Actor: "t", Reason: "resume"})
	require.NoError(t, err)
	f.waitSettled(t, 16)
}

// sampleWhile runs do and, until it returns, checks the Observer at its
// revision (observerAtRevisionErr) again and again, and once more after.
// It returns the number of revisions checked and the first error.
func (f *resizeFleet) sampleWhile(ctx context.Context, do func() error) (int, error) {
	done := make(chan struct{})
	var (
		wg      sync.WaitGroup
		samples int
		first   error
		seen    = map[int64]bool{}
	)
	wg.Go(func() {
		for {
			rev := f.obs.Revision()
			checked, err := f.observerAtRevisionErr(ctx)
			if err != nil && first == nil {
				first = err
			}
			if checked && !seen[rev] {
				seen[rev] = true
				samples++
			}
			select {
			case <-done:
				return
			default:
			}
		}
	})
	err := do()
	close(done)
	wg.Wait()
	if err == nil {
		err = first
	}
	return samples, err
}
