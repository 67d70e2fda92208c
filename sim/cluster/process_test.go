//go:build unix

package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/tenure-go/tenure/sim/cluster"
)

// processCluster starts a cluster of process members for t and, once it is
// closed, checks that every process it ever had (as recorded by pids) is
// gone.
func processCluster(t *testing.T, members int) (*cluster.Cluster, *pidSet) {
	t.Helper()
	pids := &pidSet{}
	t.Cleanup(func() { pids.requireGone(t) }) // runs after the cluster's Close
	cfg := cluster.DefaultConfig()
	cfg.Members = members
	cfg.Processes = true
	start := time.Now()
	c := cluster.NewWithConfig(t, cfg)
	t.Logf("%d process members serving with a leader after %v", members, time.Since(start).Round(time.Millisecond))
	for i := range members {
		pids.add(t, c, i)
	}
	return c, pids
}

// pidSet records the PIDs of a cluster's member processes.
type pidSet struct{ pids []int }

func (s *pidSet) add(t *testing.T, c *cluster.Cluster, i int) int {
	t.Helper()
	pid, err := c.PID(i)
	require.NoError(t, err)
	s.pids = append(s.pids, pid)
	return pid
}

func (s *pidSet) requireGone(t *testing.T) {
	t.Helper()
	for _, pid := range s.pids {
		assert.True(t, processGone(pid), "member process %d outlived the cluster", pid)
	}
}

// processGone reports whether process pid no longer runs: it does not exist
// or it is a zombie that nobody reaped yet.
func processGone(pid int) bool {
	if err := syscall.Kill(pid, 0); errors.Is(err, syscall.ESRCH) {
		return true
	}
	if runtime.GOOS != "linux" {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	// pid (comm) state ...; comm may hold spaces and parentheses.
	rest := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
	return strings.HasPrefix(strings.TrimSpace(rest), "Z")
}

// eventually retries f, each attempt bounded by 2s, every 50ms until it
// succeeds or timeout has passed.
func eventually(t *testing.T, timeout time.Duration, what string, f func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		actx, acancel := context.WithTimeout(ctx, 2*time.Second)
		err := f(actx)
		acancel()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within %v: %v", what, timeout, err)
		case <-tick.C:
		}
	}
}

// write writes k through cli, retrying until it succeeds, and returns the
// revision of the write.
func write(t *testing.T, cli *clientv3.Client, k, v string) int64 {
	t.Helper()
	var rev int64
	eventually(t, 20*time.Second, "write "+k, func(ctx context.Context) error {
		resp, err := cli.Put(ctx, k, v)
		if err == nil {
			rev = resp.Header.Revision
		}
		return err
	})
	return rev
}

// waitCaughtUp waits until member i has applied revision rev: a
// serializable read answers from the member's own state.
func waitCaughtUp(t *testing.T, c *cluster.Cluster, i int, rev int64) {
	t.Helper()
	cli, err := c.MemberClient(i)
	require.NoError(t, err)
	eventually(t, 20*time.Second, "member catches up", func(ctx context.Context) error {
		resp, err := cli.Get(ctx, "any", clientv3.WithSerializable())
		if err != nil {
			return err
		}
		if resp.Header.Revision < rev {
			return errors.New("revision " + strconv.FormatInt(resp.Header.Revision, 10) + " < " + strconv.FormatInt(rev, 10))
		}
		return nil
	})
}

func TestProcessFreezeLeader(t *testing.T) {
	c, _ := processCluster(t, 3)
	cli := c.NewClient(t)
	ctx := context.Background()
	write(t, cli, "before", "1")

	old, err := c.FreezeLeader(ctx)
	require.NoError(t, err)
	frozen := time.Now()
	state, err := c.State(old)
	require.NoError(t, err)
	assert.Equal(t, cluster.MemberFrozen, state)
	assert.False(t, c.Running(old))

	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	next, err := c.WaitNewLeader(wctx, old)
	require.NoError(t, err)
	t.Logf("member %d elected %v after leader %d froze", next, time.Since(frozen).Round(time.Millisecond), old)
	assert.NotEqual(t, old, next)

	// Straight to the new leader, and through the client of all members,
	// which finds out on its own that one of them answers nothing.
	nextCli, err := c.MemberClient(next)
	require.NoError(t, err)
	_, err = nextCli.Put(wctx, "direct", "2")
	require.NoError(t, err, "a write to the new leader must succeed")
	rev := write(t, cli, "after", "3")

	require.NoError(t, c.ThawMember(old))
	assert.True(t, c.Running(old))
	waitCaughtUp(t, c, old, rev)
	leader, err := c.WaitLeader(wctx)
	require.NoError(t, err, "all three members agree on a leader after the thaw")
	t.Logf("after the thaw member %d leads", leader)
	oldCli, err := c.MemberClient(old)
	require.NoError(t, err)
	resp, err := oldCli.Get(wctx, "after", clientv3.WithSerializable())
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	assert.Equal(t, "3", string(resp.Kvs[0].Value))
}

func TestProcessKillLeaderAndRestart(t *testing.T) {
	c, pids := processCluster(t, 3)
	cli := c.NewClient(t)
	ctx := context.Background()
	write(t, cli, "before", "1")

	leader, err := c.WaitLeader(ctx)
	require.NoError(t, err)
	pid, err := c.PID(leader)
	require.NoError(t, err)
	old, err := c.KillLeader(ctx)
	require.NoError(t, err)
	killed := time.Now()
	require.Equal(t, leader, old)
	assert.True(t, processGone(pid), "KillMember returns once the process is gone")
	state, err := c.State(old)
	require.NoError(t, err)
	assert.Equal(t, cluster.MemberStopped, state)

	wctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	next, err := c.WaitNewLeader(wctx, old)
	require.NoError(t, err)
	t.Logf("member %d elected %v after leader %d was killed", next, time.Since(killed).Round(time.Millisecond), old)
	assert.NotEqual(t, old, next)
	rev := write(t, cli, "after", "2")

	restart := time.Now()
	require.NoError(t, c.RestartMember(wctx, old))
	t.Logf("member %d restarted and serving after %v", old, time.Since(restart).Round(time.Millisecond))
	assert.True(t, c.Running(old))
	newPID := pids.add(t, c, old)
	assert.NotEqual(t, pid, newPID)
	waitCaughtUp(t, c, old, rev)
	// A linearizable read through the restarted member alone: it is back
	// in the cluster, on its old endpoint.
	oldCli, err := c.MemberClient(old)
	require.NoError(t, err)
	resp, err := oldCli.Get(wctx, "after")
	require.NoError(t, err)
	require.Len(t, resp.Kvs, 1)
	assert.Equal(t, "2", string(resp.Kvs[0].Value))
	_, err = c.WaitLeader(wctx)
	require.NoError(t, err)
}

func TestProcessFaultyClient(t *testing.T) {
	c, _ := processCluster(t, 1)
	healthy := c.NewClient(t)
	faulty, fp := c.NewFaultyClient(t)
	ctx := context.Background()
	write(t, faulty, "a", "1")
	fp.Blackhole()
	err := put(ctx, faulty, "a", "2", 300*time.Millisecond)
	require.Error(t, err, "a blackholed client's write must not succeed")
	write(t, healthy, "b", "1")
	fp.Heal()
	write(t, faulty, "c", "1")

	// A graceful stop of a process member, and a restart.
	require.NoError(t, c.StopMember(0))
	require.NoError(t, c.RestartMember(ctx, 0))
	write(t, healthy, "d", "1")
}

func TestProcessLogs(t *testing.T) {
	core, logs := observer.New(zapcore.InfoLevel)
	cfg := cluster.DefaultConfig()
	cfg.Processes = true
	cfg.Logger = zap.New(core)
	c := cluster.NewWithConfig(t, cfg)
	require.NoError(t, c.Close())
	// etcd logs this before the member reports that it started, so it is
	// in the pipe before Close kills the member, and Close reads the pipe
	// to its end. ("ready to serve client requests" may come after the
	// member reports ready, and be cut off.)
	started := logs.FilterLoggerName("m0").FilterMessage("starting an etcd server")
	assert.Positive(t, started.Len(), "the member's logs reach the cluster's logger: %d logs", logs.Len())
}

func TestProcessBadInput(t *testing.T) {
	proc, pids := processCluster(t, 1)
	emb := cluster.New(t, 1)
	ctx := context.Background()
	freeze := func(c *cluster.Cluster, i int) error { return c.FreezeMember(i) }
	thaw := func(c *cluster.Cluster, i int) error { return c.ThawMember(i) }
	kill := func(c *cluster.Cluster, i int) error { return c.KillMember(i) }
	stop := func(c *cluster.Cluster, i int) error { return c.StopMember(i) }
	restart := func(c *cluster.Cluster, i int) error { return c.RestartMember(ctx, i) }
	pid := func(c *cluster.Cluster, i int) error { _, err := c.PID(i); return err }
	newLeader := func(c *cluster.Cluster, i int) error {
		wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		_, err := c.WaitNewLeader(wctx, i)
		return err
	}
	client := func(c *cluster.Cluster, i int) error { _, err := c.MemberClient(i); return err }
	state := func(c *cluster.Cluster, i int) error { _, err := c.State(i); return err }
	type op = func(*cluster.Cluster, int) error
	// Steps run in order on the same clusters.
	for _, tc := range []struct {
		name string
		c    *cluster.Cluster
		op   op
		i    int
		want error // nil: must succeed
	}{
		{"freeze index -1", proc, freeze, -1, cluster.ErrNoMember},
		{"freeze index 1 of 1", proc, freeze, 1, cluster.ErrNoMember},
		{"kill index 3", proc, kill, 3, cluster.ErrNoMember},
		{"thaw index -1", proc, thaw, -1, cluster.ErrNoMember},
		{"pid index 1", proc, pid, 1, cluster.ErrNoMember},
		{"state index 1", proc, state, 1, cluster.ErrNoMember},
		{"member client index 1", proc, client, 1, cluster.ErrNoMember},
		{"wait new leader index -1", proc, newLeader, -1, cluster.ErrNoMember},
		{"freeze embedded", emb, freeze, 0, cluster.ErrNotProcess},
		{"thaw embedded", emb, thaw, 0, cluster.ErrNotProcess},
		{"kill embedded", emb, kill, 0, cluster.ErrNotProcess},
		{"pid embedded", emb, pid, 0, cluster.ErrNotProcess},
		{"kill embedded leader", emb, func(c *cluster.Cluster, _ int) error { _, err := c.KillLeader(ctx); return err }, 0, cluster.ErrNotProcess},
		{"freeze embedded leader", emb, func(c *cluster.Cluster, _ int) error { _, err := c.FreezeLeader(ctx); return err }, 0, cluster.ErrNotProcess},
		{"thaw running", proc, thaw, 0, cluster.ErrMemberNotFrozen},
		{"restart running", proc, restart, 0, cluster.ErrMemberRunning},
		{"sole member still leads", proc, newLeader, 0, cluster.ErrNoLeader},
		{"freeze", proc, freeze, 0, nil},
		{"freeze twice", proc, freeze, 0, cluster.ErrMemberFrozen},
		{"stop frozen", proc, stop, 0, cluster.ErrMemberFrozen},
		{"restart frozen", proc, restart, 0, cluster.ErrMemberFrozen},
		{"pid of frozen", proc, pid, 0, nil},
		{"thaw", proc, thaw, 0, nil},
		{"freeze again", proc, freeze, 0, nil},
		{"kill frozen", proc, kill, 0, nil},
		{"kill twice", proc, kill, 0, cluster.ErrMemberStopped},
		{"freeze killed", proc, freeze, 0, cluster.ErrMemberStopped},
		{"thaw killed", proc, thaw, 0, cluster.ErrMemberStopped},
		{"stop killed", proc, stop, 0, cluster.ErrMemberStopped},
		{"pid of killed", proc, pid, 0, cluster.ErrMemberStopped},
		{"restart killed", proc, restart, 0, nil},
		{"record restarted", proc, func(c *cluster.Cluster, i int) error { pids.add(t, c, i); return nil }, 0, nil},
		{"freeze restarted", proc, freeze, 0, nil},
		{"close with a frozen member", proc, func(c *cluster.Cluster, _ int) error { return c.Close() }, 0, nil},
		{"freeze closed", proc, freeze, 0, cluster.ErrClosed},
		{"kill closed", proc, kill, 0, cluster.ErrClosed},
		{"restart closed", proc, restart, 0, cluster.ErrClosed},
		{"client closed", proc, client, 0, cluster.ErrClosed},
	} {
		err := tc.op(tc.c, tc.i)
		if tc.want == nil {
			require.NoError(t, err, tc.name)
			continue
		}
		assert.ErrorIs(t, err, tc.want, tc.name)
	}

	for _, cfg := range []cluster.Config{
		{MemberBinary: "/bin/true"},
		{MemberCPUs: "0"},
		{Processes: true, TickInterval: 1500 * time.Microsecond},
	} {
		assert.ErrorIs(t, cfg.Validate(), cluster.ErrInvalidConfig, "%+v", cfg)
	}
	cfg := cluster.DefaultConfig()
	cfg.Processes = true
	cfg.MemberBinary = "/nonexistent/etcdmember"
	_, err := cluster.Start(ctx, cfg)
	assert.Error(t, err, "a missing member binary")
	cfg.MemberBinary = "/bin/false"
	_, err = cluster.Start(ctx, cfg)
	assert.ErrorIs(t, err, cluster.ErrMemberStopped, "a member binary that exits at once")
	if _, err := exec.LookPath("taskset"); err == nil {
		cfg.MemberBinary, cfg.MemberCPUs = "", "not-a-cpu-list"
		_, err = cluster.Start(ctx, cfg)
		assert.ErrorIs(t, err, cluster.ErrMemberStopped, "a CPU list taskset refuses")
	}
}

// TestProcessMemberCPUs: with MemberCPUs, every member process (and each
// of its threads) may run only on those CPUs, and the cluster serves.
func TestProcessMemberCPUs(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("CPU lists are read from Linux's /proc")
	}
	if _, err := exec.LookPath("taskset"); err != nil {
		t.Skip("no taskset command")
	}
	cfg := cluster.DefaultConfig()
	cfg.Members, cfg.Processes, cfg.MemberCPUs = 3, true, "0"
	c := cluster.NewWithConfig(t, cfg)
	for i := range 3 {
		pid, err := c.PID(i)
		require.NoError(t, err)
		tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
		require.NoError(t, err)
		require.NotEmpty(t, tasks)
		for _, task := range tasks {
			status, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/status", pid, task.Name()))
			require.NoError(t, err)
			assert.Contains(t, string(status), "\nCpus_allowed_list:\t0\n", "member %d thread %s", i, task.Name())
		}
	}
	write(t, c.NewClient(t), "pinned", "1")
}
