// Package scenario is the regression corpus: known failures of leases,
// locks and rings, each replayed on memetcd under virtual time with the
// protection switched off (where the sim/check checkers must catch it) and
// on (where they must pass).
//
//   - dead-lease-campaign (etcd#11007): etcd's concurrency.Election lets a
//     Campaign return as leader after its session's lease died while it
//     waited; tenure's election does not hand out a term.
//   - expiry-without-fencing (Jepsen, etcd 3.4.3): a lock holder paused past
//     its lease keeps working and its write lands after the next holder's;
//     tenure's term token is refused by the fenced store.
//   - stale-owner-untouched-key: a stale owner writes a key the new owner
//     has loaded but not yet written; nodes without Fencers accept it, nodes
//     with Fencers raised the floor before the new owner's first read.
//   - ring-collision (buraksezer/consistent): member IDs like "node-1" and
//     "node-11" collide on virtual-node keys built without a separator, so
//     nodes that learned the members in different orders disagree on owners,
//     and more members than partitions panics; tenure's ring.Ring is a
//     pure function of the sorted member set and never panics.
//   - watch-after-compaction: a naive holder that resumes its watch from the
//     current revision after a compaction misses its key's deletion and
//     keeps acting as holder; tenure's Term resynchronizes by reading the
//     key.
package scenario
