// Package bench measures tenure side by side with its baselines and writes
// one report: `go run ./sim bench`.
//
// Every comparison runs its implementations A/B interleaved in one process,
// on one embedded etcd (sim/cluster, 1 or 3 members), for several rounds:
// each round runs every implementation once, and the implementation that
// goes first rotates from round to round, so that a noisy machine slows all
// of them alike. The report gives the median of each implementation's
// rounds and the ratio of that median to the reference row of its table
// (tenure's, unless the table says otherwise). Absolute times depend on the
// machine; the ratios are the result.
//
// The comparisons:
//
//   - key -> owner lookup: ring.Ring and Node.Lookup against
//     buraksezer/consistent's LocateKey, a groupcache-style ring (sorted
//     virtual-node hashes, written here) and bare xxhash (the limit);
//   - fenced writes: etcdfence.Store.Put against a plain Put and a plain Put
//     in a transaction, on 1 and 3 etcd members; group commit
//     (etcdfence.Batcher, 16 writers) against single fenced writes and
//     unfenced transactions of the same size (the ceiling);
//   - routed single-writer writes against a per-operation etcd
//     concurrency.Mutex and a per-operation Redis lock (SET NX PX, Lua
//     compare-and-delete), on 64 keys and on one hot key; the Redis lock
//     fences nothing;
//   - crash failover and planned handoff: tenure's election and ownership
//     against etcd's concurrency.Election (measured) and client-go's
//     leaderelection (computed from its documented periods);
//   - a rolling restart of a 4-node fleet under load through router.Client:
//     errors seen by the caller and p99 latency, steady and during moves;
//   - ring build time, memory and partitions moved per join and leave
//     (sim/scale's RingFigures).
//
// The Redis rows need redis-server on PATH: the bench starts its own
// instance on a free loopback port in a temporary directory and skips those
// rows, with a note, when there is none.
package bench
