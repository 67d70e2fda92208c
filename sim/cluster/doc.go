// Package cluster starts real etcd clusters on loopback for tests,
// simulations and examples.
//
// A Cluster runs 1 or 3 etcd members (go.etcd.io/etcd/server/v3/embed) on
// free loopback ports with data in a temporary directory. It hands out
// clients, stops and restarts members, finds and stops the raft leader, and
// places a FaultPoint between one client and the cluster: a TCP proxy per
// member that can blackhole traffic, add latency and drop connections, so that
// one node can be cut off from etcd while the rest of the fleet keeps working.
//
// # Embedded and process members
//
// By default the members run inside the current process. A graceful stop
// (StopMember, StopLeader) is then all that can happen to one, and a
// graceful stop is no failure: etcd hands leadership to a peer first.
//
// With Config.Processes every member runs in its own OS process, the
// etcdmember command of this module, with the same settings (raft's tick
// and election timeout included, so failovers are as fast as with embedded
// members). Such a member can also fail abruptly:
//
//   - FreezeMember stops it with SIGSTOP and ThawMember resumes it with
//     SIGCONT: its peers see it go silent, as a paused VM or a long GC pause
//     looks from outside; a frozen leader is replaced after the election
//     timeout, without any leadership transfer, and catches up once thawed.
//   - KillMember kills it with SIGKILL; RestartMember starts it again on the
//     same data directory and ports, and it rejoins the cluster.
//   - FreezeLeader and KillLeader do that to the current leader;
//     WaitNewLeader waits until the others have elected another one.
//
// Clients, member clients and FaultPoints reach process members exactly as
// they reach embedded ones. State reports where each member is (stopped,
// starting, running, frozen) and PID gives a process member's process ID.
//
// # Membership and etcd releases
//
// ReplaceMember replaces a member as an operator replaces a machine:
// leadership moved away first if it leads (MoveLeader, etcdctl
// move-leader), member remove and member add through the client API, and a
// new member with an empty data directory, a new name and the old one's
// address, started with --initial-cluster-state existing. SetMemberBinary makes a
// process member run another etcdmember binary from its next start;
// PreviousMemberBinary builds one against etcd's previous minor release
// (PreviousEtcd, pinned by the separate module in internal/etcdprev), so
// that a cluster started on it is upgraded one member at a time: StopMember,
// SetMemberBinary with an empty path (the current release), RestartMember.
//
// The member binary is built once per test process with go build, from the
// module of the current directory (where go test and go run start), into
// the user's cache directory under its content hash; the go command's build
// cache makes that about a second. Config.MemberBinary names a prebuilt
// binary instead. A child reports on its standard output when it serves its
// peers, when it is ready and who it sees as the leader, so nothing waits
// on a guess.
//
// A member process never outlives the process that started it: on Linux
// the kernel kills it when its parent dies (Pdeathsig, with the starting
// thread kept alive for the child's lifetime); everywhere it exits when its
// standard input, a pipe only the parent holds, ends; and Close (which New
// and NewWithConfig register with t.Cleanup, so it runs when a test fails
// or panics) kills every member process and its process group and reaps it
// before it returns.
//
// Close stops every member, proxy and client the cluster handed out and
// removes the data directory; nothing keeps running afterwards.
//
// A new etcd leader restarts every lease's countdown from its full TTL: no
// lease expires because of a failover, whatever its TTL.
//
// The core packages of tenure never import this package: it links the etcd
// server.
package cluster
