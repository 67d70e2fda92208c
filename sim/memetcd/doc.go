// Package memetcd is an in-memory etcd for simulations under virtual time.
//
// A Server holds one etcd keyspace (MVCC with one global revision, per-key
// create and mod revisions and versions, compaction), a lessor whose leases
// expire on an injected clock (a *clockwork.FakeClock gives virtual time),
// and watchers. Server.NewClient hands out clients that implement
// clientv3.KV, clientv3.Lease and clientv3.Watcher, so tenure's own election,
// ownership and fence code runs against it unchanged: a pause of minutes
// costs microseconds.
//
// Fidelity comes from reusing the etcd client itself where it can: a
// Client's KV is clientv3.NewKVFromKVClient over an in-memory
// etcdserverpb.KVClient and its Watcher is clientv3.NewWatchFromWatchClient
// over an in-memory watch stream, so request encoding, option handling,
// error conversion and the watch client's stream semantics (created
// responses, compaction cancels, resumption, context cancellation) are the
// real client's. The server side follows etcd v3.7's apply code: the
// transaction checks (ops limit, duplicate keys in a transaction, leases,
// revisions), compare-then-execute of nested transactions, range limits,
// sorting and revision filters, keys-only and count-only reads, watch
// catch-up and progress, lease minimum TTL, revocation in one revision and
// the countdown restart on a leader change. A conformance test runs the same
// random operation sequences against memetcd and a real embedded etcd and
// requires identical normalized results.
//
// Faults for the simulator are per client (Partition, Heal, SetLatency,
// LoseResponses, DropWatches) and per server (LoseLeader, LeaderChange).
// Hooks tell a simulator of every revision committed (OnCommit, under the
// server's lock) and of every transaction about to be applied and then of
// its result (OnTxn, without the lock, so that it may inject a fault at
// that moment).
//
// Goroutines: the server runs none of its own. A fired lease timer runs its
// expiry on a goroutine of the clock; KeepAlive runs one loop per call (on
// the server's clock); the etcd client's watcher runs its usual goroutines
// per watch stream. All end when their context ends or the Client is
// closed.
//
// Determinism: the server applies every request under one lock in the order
// the requests arrive, expires leases lazily before every request (in
// expiry order, one revision each) as well as from a clock timer, and never
// iterates a map where order could leak into a result. Given the same
// sequence of calls and clock advances it produces the same revisions,
// lease IDs and responses.
package memetcd
