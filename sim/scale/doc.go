// Package scale measures what tenure's ownership protocol costs at fleet
// scale: a fleet of real ownership Nodes on one in-memory etcd
// (sim/memetcd) under virtual time, taken through a join, a graceful
// leave, a crash (a node's client partitioned forever, so its lease
// expires on virtual time) and a rolling restart of the fleet. For each it
// reports the etcd writes, revisions, keep-alives and watch traffic, the
// time to a stable ring in virtual time and in wall time on this machine,
// the partitions moved against the ideal (P/N: the share of the node that
// came or went), and the heap in use per node.
//
// Run drives it; `go run ./sim scale` prints the figures as a markdown
// table.
//
// # Sizes
//
// The default is 1000 nodes x 4096 partitions. On two cores that size runs
// bring-up, join, leave, crash and a rolling restart of a few nodes in
// about 15 minutes (11 of them in the bring-up's claim storm), but not a
// rolling restart of the whole fleet (2000 changes of about 11s each):
// every watch response makes a node rebuild its whole routing snapshot
// (O(P)), every claim change reaches every node (O(N) responses), and
// every membership change makes every node rebuild its ring, so one change
// costs O(N x P) fleet-wide and the claim storm O(N^2 x P). RESULTS.md
// holds the figures of these runs, each with its size:
//
//	go run ./sim scale -restarts 2 -skip-ring  # live 1000 x 4096, 2 restarts (~15 min)
//	go run ./sim scale -nodes 200 -restarts 10 # live 200 x 4096, ring-only 1000 x 4096
//	go run ./sim scale -nodes 50 -skip-ring    # live 50 x 4096, whole-fleet rolling restart
//	go run ./sim scale -ring-only              # ring-only 1000 x 4096, both ring algorithms
//	go run ./sim scale -ring-only -ring-heavy 10 # the same, every 10th node of weight 2
//	go run ./sim scale -ring-only -skip-ring -placement -ring-heavy 10 # placement figures
//
// # Virtual time
//
// The nodes, their sessions and memetcd all read one
// *clockwork.FakeClock. The driver advances it by Config.Step only when
// the fleet is quiescent (no goroutine runnable, no etcd request, watch
// response, snapshot or callback for Config.Quiet of wall time) and the
// ring is not yet stable, so a lease that must expire costs steps, not
// seconds, and work that needs no timer (a planned handoff: a few etcd
// round trips) takes no virtual time at all; its cost shows in the wall
// time and the etcd counters instead.
//
// # Stable
//
// A ring is stable when every live node sees the ring of the live
// members, every partition is claimed by its ring owner as every live node
// sees it (Route.Owner and a non-zero Epoch), served by that owner alone
// (Route.Local on the owner only, and the callbacks agree), and a crashed
// node serves nothing. Two nodes serving one partition at once, in
// callback order, is recorded as an overlap and fails the run.
//
// # Bring-up
//
// A fleet that joins one node at a time makes every node rebuild its ring
// on every join and shuffles partitions N times over, which is quadratic
// work before the first measurement. Run brings the fleet up instead with
// every claim parked: the driver first writes every claim key bound to a
// lease of its own, so no node can claim; each node's client is cut off
// (memetcd Partition) as soon as Join returns, and once all have joined
// their watch streams are dropped and healed, so each node catches up on
// all the member keys in one watch response (etcd batches catch-up) and
// builds its ring once; then the driver revokes its lease, deleting every
// claim in one revision, and each node claims its share in one
// transaction. Bring-up is reported, but it is not one of the measured
// phases.
//
// # Ring-only figures
//
// Rings are cheap where nodes are not: RingFigures computes, at
// Config.RingNodes x Config.RingPartitions (1000 x 4096 by default)
// whatever the live size, the partitions a join or a leave moves against
// the ideal over random samples, the time to build one ring (which every
// node pays on every membership change) and the heap one ring holds, for
// both ring algorithms side by side on the same samples (-ring-both, on by
// default on the command line), with every k-th node and joiner of weight
// 2 (-ring-heavy k).
//
// # Placement figures
//
// PlacementFigures (-placement) measures placement by load at Nodes x
// Partitions on AlgorithmWeighted without a live fleet: the load reports'
// etcd writes counted on a virtual hour by the load meter's rule, the time
// of balance.Plan and of a Balancer's Plan and Apply against memetcd
// holding the fleet's spec, members and load reports, and the passes and
// moves until the balancer stops, on three load models (-load-model).
package scale
