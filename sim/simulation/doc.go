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
// advances the clock by Config.Step (10ms) and then lets the goroutines it
// woke run: it yields the processor at least Config.Spins times and, while
// the runtime reports runnable goroutines beyond the other runs' drivers,
// up to 256 times, then sleeps Config.Yield (50µs) of real time. A pause
// of minutes costs microseconds, and on a loaded machine virtual time
// slows down rather than running ahead of the code it times. The injectable clock was chosen over testing/synctest
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
// # Faults
//
// NewSchedule draws, from the seed, each node's clock rate (within
// MaxSkew, 5%, well inside the session's safety margin of 500ms at TTL 2s)
// and Faults faults at times between one TTL and FaultFraction of the run:
// process pauses of 0 to 5 TTLs between a worker's check (its Hold and
// read) and its write, during which the node's etcd client is cut off and
// the worker waits on virtual time without looking at its tenure; one crash
// at most (the client cut forever, the node abandoned and closed with a
// cancelled context); client-etcd partitions; slow requests (SetLatency)
// and lost responses (LoseResponses: applied, the caller cannot know, so
// writes of unknown outcome and lost renewals); an etcd leader loss of up to
// 1s followed by a leader change (every lease countdown restarts); a
// release callback that hangs for 1 to 3 TTLs; broken watch streams; and
// compactions. The tenure strategies also get Config.FloorRaises (2)
// writers outside the fleet, each raising the fence floor of a partition
// in use to etcd's current revision with a Put of the floor key in the
// store's encoding, as an operator shutting out a zombie with etcdctl
// would, and releasing its claim up to a TTL later; the store's log holds
// that floor like any other, so a write admitted below it after it counts
// as stale.
//
// Planned moves (a node's join or return after its session ended, the
// balancer's moves, a migration's steps) hand their claims over in one
// transaction once the fleet requires the handover feature, which its
// first planned release records. The schedules of the tenure strategies
// hold Config.SuccessorKills (1) KillSuccessor faults: armed between one
// TTL and half the fault window, each stops the successor of the next
// hand-over, seen through memetcd's transaction hook in the holder's own
// request (handover.go): just before etcd applies it, the successor's
// lease revoked with it, so that etcd refuses the hand-over and the holder
// deletes the claim; or just after etcd committed it, before the
// successor, which learns of the claim by its watch, can have raised its
// fences and served, so that the claim bound to its lease goes with the
// lease a TTL later. Two in three are killed (at most one node dies in a
// run: after a Crash, all are paused) and the others paused for half a
// TTL to three TTLs. Result counts the
// hand-overs applied and refused and the successors stopped in each
// window.
//
// # Shape changes
//
// The schedules of the tenure strategies also hold Config.Reshapes (2)
// shape changes of the fleet, run one after the other by the real
// fleet.Operator on etcd clients of their own (reshape.go): two in three
// resize the partition count by a power of two among 8, 16 and 32
// (Operator.Resize, 2 to 8 groups at once), one in three migrates the ring
// algorithm to the other one, weighted or bounded
// (Operator.MigrateAlgorithm, 2 to 8 partitions a step). In half of them
// the first driver's context ends 50ms to 1s after it started, and a second
// driver, another process, resumes the change or aborts it. A resize moves
// a key from its parent's scope to a child's (or the children's to the
// merged partition's): the store admits a key's writes under the token of
// whichever partition owns it at that shape, and since every scope's epochs
// are etcd revisions, the stale check also orders each key's writes by
// epoch across scopes (check.Config.KeyEpochs): a parent's holder whose
// write lands after a child's is caught whether or not the parent's floor
// was retired. Every 50ms of virtual time, each node's routes for the
// workload's keys are compared with those of a fleet.Observer whenever both
// are at one etcd revision (ownership.NodeStatus.Revision): they must name
// the same partition, owner and epoch; a reader's revision is a
// consistent cut, so every difference counts (agree.go). Liveness is measured from the end of the last shape change,
// over the partitions of the final count.
//
// # Workload
//
// Clients increment counters (read-modify-write with an idempotency key
// kept in the stored value, retried until acknowledged or four TTLs have
// passed) and read them. Under Tenure an increment goes to the key's owner
// as a random live node's Lookup names it, is admitted by that owner's Hold,
// serialized per key on the owner, read with Store.Get and written with
// Store.Put under the partition's token, on a context of its own (the
// worker never consults its tenure: only the store stops it). The Recorder
// gets tenures from OnAcquired (begun at the claim's revision) and
// OnReleased, the store's log from memetcd's OnCommit hook (every fence
// floor raised and every data write applied, in revision order, lost
// responses included), write attempts and client operations; then every
// checker of sim/check runs.
//
// In one Tenure seed in three, the real balance.Balancer runs beside the
// fleet on an etcd client of its own, elected through tenure's election:
// the nodes publish the load their Holds count (every second, smoothed
// over 3 seconds) and the balancer moves partitions every 2 seconds,
// writing its moves in etcd fenced by its term (balancer.go). Each move is
// a planned move the checkers watch; Result.BalancerMoves counts those
// that landed.
//
// # Liveness
//
// After the last fault heals, every partition must be owned again within
// Config.LivenessBound: TTL plus 3s. A lease outlives the fault that
// killed its holder by at most a TTL (its last renewal may land just
// before the heal); a leader change restarts lease countdowns and adds
// etcd's 1s election timeout; a planned handoff waits for in-flight work
// and a hung release callback up to the drain timeout (1s here); the claim
// itself costs a few round trips, at most a few hundred milliseconds of
// injected latency.
//
// # Not simulated
//
// etcd's own replication (memetcd is one linearizable keyspace: a leader
// change is its lease-countdown effect and a leaderless interval, not a
// raft log), message reordering within a client connection, disk faults,
// wall-clock jumps (tenure reads only the monotonic clock; skew is a rate
// difference), network partitions between nodes (nodes only talk to
// etcd), and the HTTP router (work is routed in process).
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
