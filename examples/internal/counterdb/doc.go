// Package counterdb is the SQL store of the counter examples (counter over
// HTTP, grpccounter over gRPC): each partition's counters in the memory of
// its one owner, loaded from SQLite or PostgreSQL when the node acquires
// the partition and written through with fenced transactions.
//
//   - store.go: a partition's state under one tenure (Store.Callbacks
//     loads it on OnAcquired and drops it on OnReleased; Store.Serve gives
//     a request the loaded state of its token's partition).
//   - commit.go: Committer writes increments through, in groups
//     (sqlfence.Batcher) or one transaction each, once per idempotency key;
//     a former owner's write is refused by the partition's floor.
//   - prepare.go: the warm handoff (ownership.Callbacks.OnPrepare): the next
//     owner reads a snapshot while the holder serves and catches up after
//     its claim.
//   - slot.go: a key's slot, so that a partition's keys are one range under
//     any power-of-two partition count (a resize).
//   - db.go: the tables and the connection pool; metrics.go: the counter_*
//     metrics.
package counterdb
