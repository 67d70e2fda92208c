// Package simulation runs tenure's own election, ownership and fence code
// against the in-memory etcd of sim/memetcd under virtual time, injects a
// seeded schedule of faults, drives a keyed read-modify-write workload
// through it, records the run into a sim/check Recorder and checks it.
//
// # Virtual time
//
// Every component reads time from one *clockwork.FakeClock (through
// tenure's injectable Config.Clock fields; a node may see it through a
// skewed wrapper that runs a few percent fast or slow). A driver goroutine
// advances the clock by Config.Step and then yields real time for the
// goroutines it woke to run, so that a pause of minutes costs microseconds
// of real time. The injectable clock was chosen over testing/synctest
// because synctest bubbles exist only inside `go test`: the simulator must
// also run as `go run ./sim`, and tenure's packages already take a clock.
//
// # Determinism
//
// A seed fixes the fault schedule (times, nodes, durations), each node's
// clock rate and each client's sequence of keys and operations: the same
// seed replays the same schedule and workload. The interleaving of
// goroutines within one step of virtual time is the Go scheduler's, so two
// runs of one seed may differ in detail; every failing seed is reported
// with the command that replays its schedule.
//
// # Strategies
//
// Tenure runs ownership.Join nodes with an etcdfence.Store as their
// Fencer: a key's increment is routed to its owner, admitted by Hold, read
// and written through the Store under the partition's token. The
// baselines run the same workload and checkers without fencing: RedisLock
// takes a per-operation lock (SET NX PX, compare-and-delete unlock) on a
// simulated Redis on the same virtual clock, EtcdMutex takes etcd's
// concurrency.Mutex on memetcd; both write an unfenced store.
package simulation
