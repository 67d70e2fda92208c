// Package chaos runs tenure's fleet as real OS processes against a real
// 3-member etcd and breaks them on a seeded schedule, then checks the run
// with sim/check.
//
// A run starts a 3-member etcd whose members are processes (sim/cluster with
// Config.Processes), builds the worker command (sim/chaos/worker) once with
// go build, and starts Config.Workers workers. Each worker joins the fleet
// with ownership.Join, fences an etcdfence.Store, and serves POST
// /incr/{key} and GET /count/{key} through router.Handler; its etcd
// traffic goes through a FaultPoint of its own, so that its link alone can
// be blackholed. Clients drive the workers through a router.Client from
// several goroutines, each increment with its own idempotency key, each key
// driven by one client at a time.
//
// The faults, one at a time on a schedule derived from Config.Seed:
//
//   - pause: SIGSTOP a worker between the read and the write of an
//     increment (the worker stops itself when armed), for longer than the
//     TTL and until others hold its partitions, then SIGCONT;
//   - kill: SIGKILL a worker, and start it again later with the same ID;
//   - leader-kill: SIGKILL etcd's leader (no leadership transfer), restart it;
//   - leader-freeze: SIGSTOP etcd's leader, SIGCONT it later;
//   - blackhole: cut a worker's link to etcd for longer than the TTL, heal it.
//
// Workers report every tenure and every write attempt on standard output
// (JSON lines); the runner records them, the clients' operations, and etcd's
// own log of the counters and fence floors (every revision, read back at the
// end) into a check.Recorder, reads the final counters, and runs check.All:
// no stale write applied, at most one writer per (partition, epoch), epochs
// increasing, every acknowledged increment counted exactly once, every
// key's history linearizable. It also measures failovers (a worker's
// partitions served again after a fault cut it off) and planned handoffs.
//
// Worker processes never outlive the runner: on Linux the kernel kills
// them when the thread that started them exits (Pdeathsig), everywhere they
// exit when their standard input ends, and Run kills them before it returns.
package chaos
