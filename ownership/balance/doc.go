// Package balance is tenure's load balancer: it moves partitions from the
// members whose load per unit of capacity weight is above an upper band of
// the mean to members below a lower band, by writing placement entries
// (moves) that every node and client folds into the one owner rule, so
// each move is a planned move (drain, release, claim at a new epoch,
// fencers raised).
//
// At most one balancer acts at a time: its writes are fenced by the term
// of a tenure election (election.Term.Cmp in the same transaction), so
// etcd refuses the moves of a deposed balancer. Its moves are stale-safe:
// the transaction that writes them also checks that no member joined, left
// or changed and no drain mark changed since the snapshot they were
// computed from, and that no pin or other placement was written meanwhile
// on their partitions.
//
// Everything a pass depends on is in etcd, so a balancer elected after a
// failover plans as its predecessor would have: an operator's suspension
// (fleet.Operator.SuspendBalancer, audited; a suspended balancer plans and
// reports but writes nothing, and etcd refuses a pass planned before the
// suspension), and the cooldown, which runs from the time each balancer
// move records. Each applied pass writes its record (fleet.BalancerPass)
// in its own transaction.
//
// While an alarm stands in etcd (NOSPACE: its database is full, and etcd
// refuses every put), the balancer pauses: its passes are planned and
// reported with the alarms (Planned.Alarms) but write nothing (an error
// wrapping fleet.ErrNoSpace for NOSPACE), and it resumes at its first pass after the alarm is disarmed.
//
// Plan is the pure pass (the same code the simulator runs); Balancer reads
// the fleet, plans (Balancer.Plan, also the dry run of tenurectl balance
// plan) and applies.
package balance
