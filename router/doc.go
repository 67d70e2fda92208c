// Package router sends work for a key to the key's owner: in process, over
// HTTP between the nodes of a fleet, and from callers outside the fleet.
//
// A key belongs to partition xxhash64(key) mod P, and each partition has one
// owner node (see package ownership). Work for a key runs on its owner, under
// the owner's fencing token for the partition, so that per-key locking is
// replaced by single-writer partitioning.
//
// # In process
//
// Router.Do runs a function on this node when it owns the key, counted as in
// flight (a handoff drains it before the partition moves) and under a context
// that ends when the caller's context or the partition's tenure ends. When
// another node owns the key, Do returns the node's
// *ownership.WrongOwnerError naming the owner, its address and epoch. While
// the partition is being handed off (as the error's Releasing and Acquiring
// say), Do waits for the routing table to change (bounded by
// Config.HandoffWait and the caller's context) instead of failing at once.
//
// # HTTP inside the fleet
//
// Router.Handler wraps a local http.Handler. A request for a key this node
// owns is served locally with the token in the request's context
// (fence.FromContext) and in the Tenure-Fence-Token header. A request for a
// key another node owns is forwarded once, with httputil.ReverseProxy, marked
// with the Tenure-Forwarded header (the forwarding node's ID) and the
// Tenure-Ring-Version header. A forwarded request that lands on a node that
// does not own the key is never forwarded again: it gets 421 Misdirected
// Request with hint headers naming the owner (Tenure-Owner,
// Tenure-Owner-Addr, Tenure-Epoch, Tenure-Partition). Request and response
// bodies stream through the hop, and cancelling the client's request cancels
// the forwarded one.
//
// # Outside the fleet
//
// Client follows the fleet's members and claims in etcd through an
// ownership.Observer (the reader the nodes use), read-only and
// without a lease, and sends each request straight to the key's owner. On 421,
// on the router's own 502 and 503 answers and on connection errors it
// re-resolves the owner and retries with exponential backoff and jitter,
// bounded and honouring the context, carrying the same Idempotency-Key header
// on every attempt so that the server can apply a request at most once.
//
// # Metrics
//
// Config.Metrics and ClientConfig.Metrics take an optional
// prometheus.Registerer: tenure_router_requests_total{result="served|forwarded|refused"}
// (const label node) for a Router, tenure_client_requests_total{result="ok|retried|failed"}
// and tenure_client_retries_total for a Client. They read the Stats
// counters when scraped. New and NewClient fail with ErrMetrics if the
// metrics cannot be registered; Close unregisters them.
//
// # Lookups
//
// Ownership lookups read immutable snapshots through atomic pointers: they
// take no lock and allocate nothing, on the nodes and in the Client.
package router
