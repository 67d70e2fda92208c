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
// # Planned moves are invisible to callers
//
// A partition that moves (a node joins, leaves or is drained) stops
// admitting new work on its old owner, lets the admitted work finish, and
// only then ends the old tenure. Work that is refused meanwhile, or cut
// short because its tenure ended, is routed again to the new owner: Do runs
// the function again (here, if the partition is local again, or returns
// the *ownership.WrongOwnerError naming the new owner), and Client sends
// the request again with the same idempotency key. Work reports the end of
// its tenure by returning an error that is fence.ErrStale (its store
// refused its write), ownership.ErrMoved or ownership.ErrLost, or its
// context's error after the context ended with such a cause: ownership.Ended
// is the one test of it, which Do and WriteError apply. An HTTP handler
// served through Handler answers such an error with WriteError, the one
// writer of a handler's errors:
//
//	func (s *store) incr(w http.ResponseWriter, r *http.Request) {
//		tok, _ := fence.FromContext(r.Context())
//		if err := s.db.Incr(r.Context(), tok, r.PathValue("key")); err != nil {
//			if !router.WriteError(w, r, err) { // a retryable refusal if the tenure ended
//				http.Error(w, err.Error(), http.StatusInternalServerError)
//			}
//			return
//		}
//		io.WriteString(w, "ok")
//	}
//
// Nobody has to write a retry loop for a planned move.
//
// # HTTP inside the fleet
//
// Handler wraps a local http.Handler. A request for a key this node owns is
// served locally with the token in the request's context (fence.FromContext)
// and in the Tenure-Fence-Token header. A request for a key another node
// owns is forwarded once, with httputil.ReverseProxy, marked with the
// Tenure-Forwarded header (the forwarding node's ID) and the
// Tenure-Ring-Version header; Config.Rewrite adds what the nodes ask of
// each other (an identity, a credential). A forwarded request that lands
// on a node that does not own the key is never forwarded again. Request and response
// bodies stream through the hop, and cancelling the client's request
// cancels the forwarded one.
//
// Every request the router does not serve gets a refusal in tenure's one
// wire format, httpfence.WriteRefusal's (the Tenure-Refusal header and a
// JSON body), whose "hint" object names the partition's owner, its address
// and epoch (the route of an *ownership.WrongOwnerError; refusal.go lists
// its fields): not-owner (421) for a forwarded request on a non-owner; handoff
// (503) while the partition moves, no owner is known or the owner cannot be
// reached; session-lost (503) from a node that lost its session or is
// closed; stale (409) and unavailable (503) from WriteError when the local
// handler's write was refused or etcd could not serve it. All of them are
// retryable; httpfence.ReadRefusal reads them, and Client reads their hint.
// Which kind a request gets is decided as grpcroute's Server decides it
// for a call, and each kind's status, retryability and hint are one row of
// tenure's refusal table, shared by both wires (internal/refusal/table.go;
// the README shows it).
//
// # Outside the fleet
//
// Client reads the fleet's spec (partition count, load factor and ring
// algorithm) from etcd, then follows the fleet's members and claims through
// an fleet.Observer (the reader the nodes use), read-only and without a
// lease, and sends each request straight to the key's owner. On every
// retryable refusal and on connection errors it re-resolves the owner and
// retries with exponential backoff and jitter, bounded and honouring the
// context, carrying the same Idempotency-Key header on every attempt so
// that the server can apply a request at most once.
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
