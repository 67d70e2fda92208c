// Package fence provides fencing tokens and the store-side checks that make a
// stale owner harmless.
//
// A Token names what it fences (its Scope, such as "p/17" for partition 17 or
// "leader/billing" for an election) and the Epoch at which its holder's tenure
// began: the etcd revision at which the holder's claim or leadership key was
// created. Epochs of successive holders of the same scope strictly increase,
// because etcd revisions do.
//
// Every side effect carries a token, and the store admits a token for a scope
// only if its epoch is at least the highest epoch it has admitted for that
// scope (equal epochs are the same holder continuing). A holder that was
// paused past the end of its tenure wakes up with an older epoch than the one
// its successor already presented, and the store rejects it with an error for
// which errors.Is(err, ErrStale) holds, however long the pause was.
//
// A resize of the partition count (see the package ownership
// documentation) changes which scopes hold a key, and fencing follows it
// with the same rule. When a group of partitions changes its count, etcd
// records the change at one revision D, after every source partition's
// claim ended and before any target partition is claimed: every token of
// a source has an epoch below D, and every token of a target one above
// it. A target's owner, after its claim and before it admits any work,
// advances every Fencer to its own token as usual and also to
// Token{Scope: PartitionScope(src), Epoch: D} for each source src of its
// group, so that every token of a parent (or of the children of a merge)
// is refused at every store, whatever key it writes, however long its
// holder was paused. An aborted resize moves a group back the same way,
// the new owners of its sources retiring its targets at the revision of
// the move back. A source and a target may share a partition number,
// hence a scope: the target's epoch is above D, so it is admitted. A
// custom Fencer needs nothing new: Advance raises a scope's floor to the
// token's epoch (a scope it has not seen starts at it), and may answer
// ErrStale when the floor is higher already (another target of the group
// retired it first), which the node takes as done.
//
// Gate is the in-memory form of that rule. Sub-packages apply it inside real
// stores: etcd transactions, SQL transactions and HTTP requests.
package fence
