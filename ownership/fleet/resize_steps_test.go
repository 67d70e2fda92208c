package fleet_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/cluster"
)

// resizeFleet is a fleet of in-process nodes with an Observer and an
// Operator, for the resize tests.
type resizeFleet struct {
	name      string
	obsClient *clientv3.Client // the Operator's and the Observer's
	nodes     []*ownership.Node
	regs      []*prometheus.Registry
	op        *fleet.Operator
	obs       *fleet.Observer
	keys      []string
}

// newResizeFleet joins ids to a fleet of p partitions, each node on a
// client of its own and with a metrics registry of its own.
func newResizeFleet(t *testing.T, c *cluster.Cluster, name string, p int, ids ...string) *resizeFleet {
	t.Helper()
	f := &resizeFleet{name: name}
	for _, id := range ids {
		cfg := testConfig(t, name, id, p)
		reg := prometheus.NewPedanticRegistry()
		cfg.Metrics = reg
		f.nodes = append(f.nodes, join(t, c.NewClient(t), cfg))
		f.regs = append(f.regs, reg)
	}
	waitStable(t, 20*time.Second, f.nodes...)
	cli := c.NewClient(t)
	f.obsClient = cli
	var err error
	f.op, err = fleet.NewOperator(cli, fleet.OperatorConfig{Cluster: name})
	require.NoError(t, err)
	f.obs, err = fleet.Observe(opCtx(t), cli, fleet.ObserverConfig{Cluster: name, Ring: ring.Config{Partitions: p, LoadFactor: 1.25}})
	require.NoError(t, err)
	t.Cleanup(f.obs.Close)
	for i := range 64 {
		f.keys = append(f.keys, fmt.Sprintf("key-%d", i))
	}
	return f
}

// agreeErr returns nil once every node, the Observer and the Operator name
// the same partition, by the rule of count partitions, and the same
// holder and epoch for every sampled key, and every node serves its ring's
// partitions.
func (f *resizeFleet) agreeErr(ctx context.Context, count int) error {
	if err := stableErr(f.nodes); err != nil {
		return err
	}
	for _, key := range f.keys {
		ro := f.obs.Lookup(key)
		st, err := f.op.Lookup(ctx, key)
		if err != nil {
			return err
		}
		if ro.Partition != ring.PartitionOf(key, count) || st.Partition != ro.Partition || st.Owner != ro.Owner || st.Epoch != ro.Epoch || ro.Epoch == 0 {
			return fmt.Errorf("%s: observer %d %s@%d, operator %d %s@%d, want partition %d", key, ro.Partition, ro.Owner, ro.Epoch,
				st.Partition, st.Owner, st.Epoch, ring.PartitionOf(key, count))
		}
		for _, n := range f.nodes {
			if rn := n.Lookup(key); rn.Partition != ro.Partition || rn.Owner != ro.Owner || rn.Epoch != ro.Epoch {
				return fmt.Errorf("%s: %s names %d %s@%d, the observer %d %s@%d", key, n.ID(), rn.Partition, rn.Owner, rn.Epoch,
					ro.Partition, ro.Owner, ro.Epoch)
			}
		}
	}
	return nil
}

// waitSettled waits until the fleet serves count partitions and its
// readers agree (agreeErr).
func (f *resizeFleet) waitSettled(t *testing.T, count int) {
	t.Helper()
	ctx := opCtx(t)
	require.NoError(t, waitFor(30*time.Second, func() error {
		if st, err := f.op.ResizeStatus(ctx); err != nil || st.InProgress || st.Partitions != count {
			return fmt.Errorf("status %+v, %v", st, err)
		}
		for _, n := range f.nodes {
			if p := n.Ring().Partitions(); p != count {
				return fmt.Errorf("%s uses %d partitions", n.ID(), p)
			}
		}
		return f.agreeErr(ctx, count)
	}, f.nodes...))
}

// observerAtRevisionErr checks the Observer against etcd at the revision
// its view is at: for every sampled key it names the partition, holder and
// epoch the Operator reads at that revision. A view that moved while it
// was read is not checked (checked false).
func (f *resizeFleet) observerAtRevisionErr(ctx context.Context) (checked bool, err error) {
	rev := f.obs.Revision()
	routes := make([]fleet.Route, len(f.keys))
	for i, key := range f.keys {
		routes[i] = f.obs.Lookup(key)
	}
	if f.obs.Revision() != rev {
		return false, nil
	}
	sts, err := fleet.LookupAt(ctx, f.op, f.keys, rev)
	if err != nil {
		return false, err
	}
	for i, key := range f.keys {
		st, r := sts[i], routes[i]
		if st.Partition != r.Partition || st.Epoch != r.Epoch || (st.Epoch != 0 && st.Owner != r.Owner) {
			return true, fmt.Errorf("at revision %d, %s: observer %d %s@%d, etcd %d %s@%d", rev, key, r.Partition, r.Owner, r.Epoch,
				st.Partition, st.Owner, st.Epoch)
		}
	}
	return true, nil
}

// groupsMoved returns the sum over the nodes of
// tenure_resize_groups_moved_total and of the sample count of
// tenure_resize_group_duration_seconds.
func (f *resizeFleet) groupsMoved(t *testing.T) (moved, timed uint64) {
	t.Helper()
	for _, reg := range f.regs {
		mfs, err := reg.Gather()
		require.NoError(t, err)
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				switch mf.GetName() {
				case "tenure_resize_groups_moved_total":
					moved += uint64(m.GetCounter().GetValue())
				case "tenure_resize_group_duration_seconds":
					timed += m.GetHistogram().GetSampleCount()
				}
			}
		}
	}
	return moved, timed
}

// waitGroupsMoved waits until the nodes' metrics count want groups moved,
// each timed, and checks that they count no more. A node counts a group
// as it handles the response of the transaction that moved it, which may
// come after the rest of the fleet has seen the move and gone on.
func (f *resizeFleet) waitGroupsMoved(t *testing.T, want uint64) {
	t.Helper()
	require.NoError(t, waitFor(10*time.Second, func() error {
		if moved, timed := f.groupsMoved(t); moved < want || timed < want {
			return fmt.Errorf("%d groups moved, %d timed, want %d", moved, timed, want)
		}
		return nil
	}, f.nodes...))
	moved, timed := f.groupsMoved(t)
	require.Equal(t, want, moved)
	require.Equal(t, want, timed)
}

// stopAt returns a driver hook that stops the driver at the nth time it
// passes step.
func stopAt(step string, nth int) func(string) bool {
	seen := 0
	return func(s string) bool {
		if s == step {
			seen++
		}
		return seen != nth || s != step
	}
}

// TestResizeDriverStoppedAtEachStep stops the resize's driver after each
// of its steps, as a crash there would, checks that the readers agree
// while it is stopped (the groups it asked to move complete without it),
// and runs it again: the resize completes with every reader agreeing. An
// abort is stopped the same way, after it is written and after its first
// groups are asked back. Every group's phase change is counted exactly
// once by the nodes' tenure_resize_groups_moved_total, and timed by
// tenure_resize_group_duration_seconds.
func TestResizeDriverStoppedAtEachStep(t *testing.T) {
	c := cluster.New(t, 1)
	opts := fleet.ResizeOptions{Actor: "t", Reason: "steps", Budget: 3}
	for i, tc := range []struct {
		name  string
		step  string
		nth   int
		abort bool
	}{
		{name: "start", step: "start", nth: 1},
		{name: "first-ask", step: "moving", nth: 1},
		{name: "second-ask", step: "moving", nth: 2},
		{name: "abort", step: "abort", nth: 1, abort: true},
		{name: "abort-first-ask", step: "moving", nth: 1, abort: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := opCtx(t)
			f := newResizeFleet(t, c, fmt.Sprintf("steps%d", i), 8, "a", "b")
			if !tc.abort {
				_, err := f.op.Resize(ctx, 32, fleet.ResizeStopping(opts, stopAt(tc.step, tc.nth)))
				require.ErrorIs(t, err, fleet.ErrResizeStopped)
				_, err = f.observerAtRevisionErr(ctx)
				require.NoError(t, err)
				rep, err := f.op.Resize(ctx, 32, opts)
				require.NoError(t, err)
				require.True(t, rep.Completed)
				f.waitSettled(t, 32)
				f.waitGroupsMoved(t, 8) // every group done once
				return
			}
			// Forward until some groups are done, then abort.
			_, err := f.op.Resize(ctx, 32, fleet.ResizeStopping(opts, stopAt("moving", 2)))
			require.ErrorIs(t, err, fleet.ErrResizeStopped)
			require.NoError(t, waitFor(20*time.Second, func() error {
				st, err := f.op.ResizeStatus(ctx)
				if err == nil && (st.Done < 3 || st.Moving > 0) {
					err = fmt.Errorf("%d done, %d moving", st.Done, st.Moving)
				}
				return err
			}, f.nodes...))
			st, err := f.op.ResizeStatus(ctx)
			require.NoError(t, err)
			done := st.Done
			_, err = f.op.Resize(ctx, 0, fleet.ResizeStopping(fleet.ResizeOptions{Actor: "t", Reason: "abort", Abort: true}, stopAt(tc.step, tc.nth)))
			require.ErrorIs(t, err, fleet.ErrResizeStopped)
			_, err = f.op.Resize(ctx, 32, opts)
			require.ErrorIs(t, err, fleet.ErrResizeInProgress, "an aborting resize is not resumed forward")
			rep, err := f.op.Resize(ctx, 8, fleet.ResizeOptions{Actor: "t", Reason: "abort again"})
			require.NoError(t, err, "the starting count resumes the abort")
			require.True(t, rep.Completed)
			f.waitSettled(t, 8)
			f.waitGroupsMoved(t, uint64(2*done)) // every done group done once and moved back once
		})
	}
}

// TestResizeNodeKilledMidStep: a node that holds sources of the groups
// asked to move loses etcd for good (its client closed, as a crash would
// leave it) right after the driver asked them: its claims expire, the
// other nodes mark its groups done, and the resize completes.
func TestResizeNodeKilledMidStep(t *testing.T) {
	c := cluster.New(t, 1)
	ctx := opCtx(t)
	f := newResizeFleet(t, c, "killed", 8, "a", "b")
	cfg := testConfig(t, "killed", "c", 8)
	vcli := c.NewClient(t)
	victim, err := ownership.Join(ctx, vcli, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { closeNode(t, victim) })
	waitStable(t, 20*time.Second, append(f.nodes, victim)...)
	require.NotEmpty(t, victim.Owned())
	killed := false
	_, err = f.op.Resize(ctx, 16, fleet.ResizeStopping(fleet.ResizeOptions{Actor: "t", Reason: "kill", Budget: 8}, func(step string) bool {
		if step == "moving" && !killed {
			killed = true
			require.NoError(t, vcli.Close())
		}
		return true
	}))
	require.NoError(t, err)
	require.True(t, killed)
	f.waitSettled(t, 16)
	for _, key := range f.keys {
		require.NotEqual(t, "c", f.obs.Lookup(key).Owner)
	}
}
