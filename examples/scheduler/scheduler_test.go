package main

import (
	"fmt"
	"net"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tenure-go/tenure/examples/internal/proctest"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestMain is proctest.VerifyTestMain.
func TestMain(m *testing.M) { proctest.VerifyTestMain(m) }

const (
	testJob     = "close-billing-period"
	testTTL     = 2 * time.Second
	testPeriod  = time.Second
	testHold    = 150 * time.Millisecond
	testTenants = "acme,globex,initech"
)

// TestPausedLeader runs three scheduler processes on a 3-member etcd and one
// database, pauses the leader with SIGSTOP between deciding which period to
// close and writing it, for longer than the TTL, and resumes it: the new
// leader closes that period and catches up, the database refuses the
// former leader's late write, and every period of every tenant is closed
// exactly once. Then every process stops on SIGTERM, the leader first
// (its successor takes over without waiting for a TTL), each with status 0.
func TestPausedLeader(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs processes")
	}
	began := time.Now()
	bin := proctest.Build(t, "scheduler")
	etcd := cluster.New(t, 3)
	spec, db, dialect := testDB(t)
	args := []string{
		"--etcd", strings.Join(etcd.Endpoints(), ","), "--db", spec, "--cluster", "sched-test",
		"--period", testPeriod.String(), "--ttl", testTTL.String(), "--hold", testHold.String(),
		"--tenants", testTenants,
	}
	procs := make([]*proctest.Proc, 3)
	for i := range procs {
		procs[i] = proctest.Start(t, bin, fmt.Sprintf("n%d", i+1), args...)
	}
	proctest.WaitFor(t, "every process ready", func() bool {
		for _, p := range procs {
			if !p.Ready() {
				return false
			}
		}
		return true
	}, procs...)
	t.Logf("3 processes ready after %v", time.Since(began).Round(time.Millisecond))

	leader := waitLeader(t, procs, nil)
	proctest.WaitFor(t, "two periods closed by "+leader.ID, func() bool {
		n, err := leader.Metric("scheduler_runs_total")
		return err == nil && n >= 6
	}, procs...)

	// Pause the leader the moment it has decided to close a period.
	var (
		mu     sync.Mutex
		held   proctest.LogLine
		stopAt time.Time
	)
	leader.SetHook(func(l proctest.LogLine) {
		if l.Msg() != "holding before the write" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if held != nil {
			return
		}
		if err := leader.Cmd.Process.Signal(syscall.SIGSTOP); err == nil {
			held, stopAt = l, time.Now()
		}
	})
	proctest.WaitFor(t, "the leader paused before a write", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return held != nil
	}, procs...)
	leader.SetHook(nil)
	tenant, period := held.Str("tenant"), held.Str("period_start")
	t.Logf("%s (epoch %s) stopped before closing %s %s", leader.ID, held.Str("epoch"), tenant, period)

	others := without(procs, leader)
	successor := waitLeader(t, others, others)
	t.Logf("%s elected %v after the pause", successor.ID, time.Since(stopAt).Round(time.Millisecond))
	proctest.WaitFor(t, successor.ID+" closing the held period", func() bool {
		if len(leader.Find("period closed", matches(tenant, period))) != 0 {
			t.Fatalf("the SIGSTOP missed the hold window: %s closed %s %s before it stopped", leader.ID, tenant, period)
		}
		return len(successor.Find("period closed", matches(tenant, period))) == 1
	}, others...)
	proctest.WaitFor(t, "a pause longer than the TTL", func() bool { return time.Since(stopAt) > testTTL }, others...)

	leader.Signal(t, syscall.SIGCONT)
	t.Logf("%s resumed after %v", leader.ID, time.Since(stopAt).Round(time.Millisecond))
	proctest.WaitFor(t, leader.ID+"'s late write refused", func() bool {
		return len(leader.Find("stale run rejected", matches(tenant, period))) == 1
	}, procs...)
	if got := leader.Find("period closed", matches(tenant, period)); len(got) != 0 {
		t.Fatalf("%s logged closing %s %s after its pause: %v", leader.ID, tenant, period, got)
	}
	proctest.WaitFor(t, leader.ID+" counting the stale run and ready again", func() bool {
		n, err := leader.Metric("scheduler_stale_runs_rejected_total")
		return err == nil && n == 1 && leader.Ready()
	}, procs...)

	// The job keeps up: every tenant's period that has ended by now gets
	// closed.
	now := time.Now()
	proctest.WaitFor(t, "every tenant caught up", func() bool {
		last := make(map[string]int64)
		for _, r := range closedRows(t, db, dialect, testJob) {
			last[r.tenant] = max(last[r.tenant], r.end)
		}
		for _, tn := range splitList(testTenants) {
			if last[tn] < now.Truncate(testPeriod).UnixMilli() {
				return false
			}
		}
		return true
	}, procs...)

	// A graceful stop of the leader hands over without waiting for a TTL.
	leader2 := waitLeader(t, procs, nil)
	rest := without(procs, leader2)
	stopping := time.Now()
	leader2.Stop(t)
	next := waitLeader(t, rest, rest)
	handoff := time.Since(stopping)
	t.Logf("SIGTERM to %s: %s leads %v later", leader2.ID, next.ID, handoff.Round(time.Millisecond))
	if handoff >= testTTL {
		t.Errorf("handoff after SIGTERM took %v, not less than the TTL %v", handoff, testTTL)
	}
	for _, p := range rest {
		p.Stop(t)
	}

	checkExactlyOnce(t, closedRows(t, db, dialect, testJob), procs)
	t.Logf("%s: %v in all", dialect, time.Since(began).Round(time.Millisecond))
}

// matches selects the log lines about tenant's period starting at start.
func matches(tenant, start string) func(proctest.LogLine) bool {
	return func(l proctest.LogLine) bool { return l.Str("tenant") == tenant && l.Str("period_start") == start }
}

func without(ps []*proctest.Proc, x *proctest.Proc) []*proctest.Proc {
	var out []*proctest.Proc
	for _, p := range ps {
		if p != x {
			out = append(out, p)
		}
	}
	return out
}

// waitLeader waits until exactly one of ps reports scheduler_is_leader 1,
// and returns it. Processes in alive must not exit meanwhile.
func waitLeader(t *testing.T, ps, alive []*proctest.Proc) *proctest.Proc {
	t.Helper()
	var leader *proctest.Proc
	proctest.WaitFor(t, "one leader", func() bool {
		leader = nil
		n := 0
		for _, p := range ps {
			if v, err := p.Metric("scheduler_is_leader"); err == nil && v == 1 {
				leader = p
				n++
			}
		}
		return n == 1
	}, alive...)
	return leader
}

// checkExactlyOnce checks the database after the run: for each tenant the
// closed periods are contiguous (each starts where the previous ended), and
// they are exactly the periods the processes logged as closed, each logged
// once.
func checkExactlyOnce(t *testing.T, rows []closedRow, procs []*proctest.Proc) {
	t.Helper()
	logged := make(map[string]string) // tenant/start -> node
	for _, p := range procs {
		for _, l := range p.Find("period closed", nil) {
			k := l.Str("tenant") + "/" + l.Str("period_start")
			if by, dup := logged[k]; dup {
				t.Errorf("period %s logged as closed by %s and by %s", k, by, p.ID)
			}
			logged[k] = p.ID
		}
	}
	byTenant := make(map[string][]closedRow)
	for _, r := range rows {
		byTenant[r.tenant] = append(byTenant[r.tenant], r)
		k := r.tenant + "/" + stamp(fromMillis(r.start))
		by, ok := logged[k]
		switch {
		case !ok:
			t.Errorf("row %s (by %s) has no log line", k, r.closedBy)
		case by != r.closedBy:
			t.Errorf("row %s closed by %s, but %s logged it", k, r.closedBy, by)
		}
		delete(logged, k)
	}
	for k, by := range logged {
		t.Errorf("%s logged closing %s, which is not in the database", by, k)
	}
	for _, tn := range splitList(testTenants) {
		rs := byTenant[tn]
		if len(rs) == 0 {
			t.Errorf("tenant %s: no period closed", tn)
			continue
		}
		for i := 1; i < len(rs); i++ {
			if rs[i].start != rs[i-1].end {
				t.Errorf("tenant %s: period %s follows one ending %s", tn, stamp(fromMillis(rs[i].start)), stamp(fromMillis(rs[i-1].end)))
			}
		}
		t.Logf("tenant %s: %d contiguous periods %s .. %s", tn, len(rs), stamp(fromMillis(rs[0].start)), stamp(fromMillis(rs[len(rs)-1].end)))
	}
}

// TestEmbeddedEtcd runs one process that serves etcd (--embedded-etcd) and
// one that uses it, as the README's three terminals do with two.
func TestEmbeddedEtcd(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and runs processes")
	}
	bin := proctest.Build(t, "scheduler")
	spec, db, dialect := testDB(t)
	ports := freePorts(t, 2)
	common := []string{"--db", spec, "--cluster", "sched-embedded", "--period", "500ms", "--ttl", testTTL.String(), "--tenants", testTenants}
	a := proctest.Start(t, bin, "a", append([]string{"--embedded-etcd", t.TempDir(), "--embedded-etcd-listen", ports[0], "--embedded-etcd-peer", ports[1]}, common...)...)
	b := proctest.Start(t, bin, "b", append([]string{"--etcd", "http://" + ports[0]}, common...)...)
	procs := []*proctest.Proc{a, b}
	proctest.WaitFor(t, "both ready", func() bool { return a.Ready() && b.Ready() }, procs...)
	leader := waitLeader(t, procs, procs)
	proctest.WaitFor(t, "two periods closed", func() bool {
		n, err := leader.Metric("scheduler_runs_total")
		return err == nil && n >= 6
	}, procs...)
	b.Stop(t) // the one without etcd first
	if leader == b {
		waitLeader(t, []*proctest.Proc{a}, []*proctest.Proc{a})
	}
	a.Stop(t)
	checkExactlyOnce(t, closedRows(t, db, dialect, testJob), procs)
}

// freePorts returns n loopback addresses whose ports were free a moment ago.
func freePorts(t *testing.T, n int) []string {
	t.Helper()
	var out []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		out = append(out, ln.Addr().String())
	}
	return out
}
