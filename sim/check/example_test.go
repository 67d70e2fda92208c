package check_test

import (
	"fmt"
	"strings"
	"time"

	"github.com/tenure-go/tenure/sim/check"
)

// A run records ownership, the store's log, writes and client operations
// into a Recorder (from any goroutine), then checks the History and prints
// the summary row.
func Example() {
	var rec check.Recorder
	at := func(ms int) time.Duration { return time.Duration(ms) * time.Millisecond }

	rec.SetInitial("c", "0")

	// Node A owns partition 0 under epoch 10 and increments counter "c".
	rec.BeginTenure("p/0", 10, "A", at(0))
	rec.RaiseFloor("p/0", 10, at(1))
	op := rec.InvokeOp(check.Op{Client: "client-1", Key: "c", Kind: check.Incr, Delta: 1, IdemKey: "req-1", Invoke: at(2)})
	w := rec.InvokeWrite(check.Write{Key: "c", Scope: "p/0", Epoch: 10, Writer: "A", Invoke: at(3), Read: "0", HasRead: true, Value: "1"})
	rec.Applied(w, at(4))
	rec.ReturnWrite(w, check.Accepted, at(5))
	rec.ReturnOp(op, check.Result{Outcome: check.Accepted, At: at(6), N: 1, HasN: true})

	// A's session is lost; B takes over 2s later under epoch 42.
	rec.EndTenure("p/0", 10, "A", at(1000))
	rec.BeginTenure("p/0", 42, "B", at(3000))
	rec.RaiseFloor("p/0", 42, at(3001))
	op = rec.InvokeOp(check.Op{Client: "client-1", Key: "c", Kind: check.Count, Invoke: at(3100)})
	rec.ReturnOp(op, check.Result{Outcome: check.Accepted, At: at(3101), N: 1})
	rec.SetFinal("c", "1")

	report, err := check.All(rec.History(), check.Config{
		Liveness: &check.LivenessSpec{From: 0, Until: at(4000), HealedAt: at(1000), Bound: 5 * time.Second},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	s := report.Summary()
	fmt.Println("ok:", report.OK())
	fmt.Println(s.Operations, "operations,", s.StaleWritesAccepted, "stale,", s.LostUpdates, "lost,", s.DoubleExecutions, "double")
	fmt.Println("unowned partition-seconds:", s.UnownedPartitionSeconds, "failover max:", s.FailoverMax)
	fmt.Println("linearizable:", s.Linearizable)
	// Output:
	// ok: true
	// 3 operations, 0 stale, 0 lost, 0 double
	// unowned partition-seconds: 2 failover max: 2s
	// linearizable: yes
}

// The classic lost update, recorded without fencing: the old holder reads,
// pauses past its lease, the new holder reads and writes, and the old
// holder writes what it computed from its stale read. The store accepts
// both; the checkers see it.
func ExampleAll_lostUpdate() {
	h := &check.History{
		Tenures: []check.Tenure{
			{Scope: "p/0", Epoch: 1, Holder: "A", Start: 0, End: 30 * time.Millisecond},
			{Scope: "p/0", Epoch: 2, Holder: "B", Start: 40 * time.Millisecond, End: check.Never},
		},
		Writes: []check.Write{
			{ID: 1, Key: "k", Scope: "p/0", Epoch: 2, Writer: "B", Invoke: 50 * time.Millisecond, Return: 52 * time.Millisecond,
				Outcome: check.Accepted, Read: "0", HasRead: true, Value: "1"},
			{ID: 2, Key: "k", Scope: "p/0", Epoch: 1, Writer: "A", Invoke: 60 * time.Millisecond, Return: 62 * time.Millisecond,
				Outcome: check.Accepted, Read: "0", HasRead: true, Value: "1"},
		},
		Initial: map[string]string{"k": "0"},
		Final:   map[string]string{"k": "1"},
	}
	report, err := check.All(h, check.Config{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(strings.Join(report.Violations(), "\n"))
	fmt.Println(report.Summary())
	// Output:
	// stale write accepted: write #2 by A to "k" under p/0@1 [60ms, 62ms] accepted value "1" (read "0"), below floor 2 set by write #1 by B to "k" under p/0@2 [50ms, 52ms] accepted value "1" (read "0")
	// lost update on "k": 2 acknowledged writes read "0": write #1 by B to "k" under p/0@2 [50ms, 52ms] accepted value "1" (read "0"); write #2 by A to "k" under p/0@1 [60ms, 62ms] accepted value "1" (read "0")
	// ops=2 stale=1 lost=1 double=0 epochs=0 unowned=0.000s maxgap=0s failover p50=10ms p99=10ms max=10ms linearizable=yes
}
