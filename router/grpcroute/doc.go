// Package grpcroute routes gRPC calls by key to the key's owner in a tenure
// fleet, with the guarantees the HTTP router (package router) gives: each
// call runs on its key's owner, under the owner's fencing token, and a
// planned move of the key's partition never fails a call.
//
// # Client side
//
// A Client makes connections whose target names a fleet: Target(cluster)
// ("tenure:///<cluster>") or TargetPrefix(prefix). The connection's resolver
// reads the fleet's spec and follows its members and claims in etcd
// through a fleet.Observer (read-only, no lease; the reader the nodes
// use), and gives the balancer every owner's address at each change. The
// balancer keeps a connection to every owner and sends each
// call to the owner of its key; a call whose owner is unknown or not
// reachable yet waits for it, bounded by the call's deadline, and is never
// sent to a node that is not the owner while the owner is known (unlike
// grpc-go's ring_hash, which gives affinity, not ownership).
//
// The key of a unary call comes from ClientConfig.Key, a function of the
// request message, or from WithKey, or from the MetadataKey metadata; that
// of a streaming call from WithKey or the metadata. Every attempt of one
// call carries the same MetadataIdempotencyKey (unless
// ClientConfig.NoIdempotencyKey says its method needs none). With
// ClientConfig.OmitKeyMetadata, a unary call whose key ClientConfig.Key
// takes from the request leaves the key out of the metadata, for nodes
// whose ServerConfig.Key takes it from the request too. A call refused with a
// retryable refusal (not the owner, handoff, session lost, stale,
// unavailable), or that found its owner unavailable (codes.Unavailable),
// is sent again to the owner named by the refusal's hint or by the
// watched view, whichever is newer: at once when the hint is news (a
// claim newer than any the call has seen, or once the next owner of the
// claim that ended), else after a delay of ClientConfig.Backoff cut short
// when the view of the key's partition changes, as router.Client does;
// bounded in attempts and by the call's deadline:
//
//	c, err := grpcroute.NewClient(etcd, grpcroute.ClientConfig{Key: keyOfRequest, SessionTTL: 10 * time.Second})
//	conn, err := c.NewConn(grpcroute.Target("counter"), grpc.WithTransportCredentials(creds))
//	defer conn.Close()
//	reply, err := counterpb.NewCounterClient(conn).Add(ctx, &counterpb.AddRequest{Key: "k"})
//
// # Owners that do not answer
//
// An owner may stop answering without closing its connections: paused
// (GC, SIGSTOP, VM migration) or cut off from etcd. Its lease expires at
// most a TTL after it stopped renewing, and the next owner serves its
// partitions, but the calls already sent to it would wait for it. gRPC's
// keepalive cannot tell in time: a grpc-go client pings at most every
// 10s, and a grpc-go server by default refuses pings more often than
// every 5 minutes. So, as router.Client does, a Client cuts
// off an attempt that has no answer within ClientConfig.AttemptTimeout
// (half of ClientConfig.SessionTTL, the fleet's TTL, by default) once the
// balancer sent it to a node, and sends it again with the same
// idempotency key: to the same owner while the fleet still names it, to
// the new owner once its lease has expired. A call sent to a paused
// owner is answered by its successor about one AttemptTimeout after the
// paused owner's lease expired at worst, whatever the pause's length; the
// paused owner refuses the copies it received when it wakes (its session
// is gone), and its handlers' late writes are refused by the fenced
// store (TestFrozenOwner, with the owner in a process of its own). An
// attempt cut off fails with router.ErrAttemptTimeout (also
// context.DeadlineExceeded, and status code DeadlineExceeded) only when
// it was the call's last.
//
// For a unary call, the answer is the reply or the status. For a
// streaming call, it is the first thing the node sends: its header (which
// gRPC sends with the first response message, or earlier when the
// handler calls grpc.SendHeader), a message, or the status; until then
// the bound counts only the time the caller waits on the stream (in
// RecvMsg, Header or SendMsg), from the later of the start of the wait
// and the caller's last message. A caller that sends for a long time
// before it reads is not cut off, and a stream that has started
// answering is never cut off, however long it lasts; a handler that may
// stay silent longer than AttemptTimeout before its first message should
// send its header first.
//
// The Conn is a *grpc.ClientConn that also says where it sends a key's
// calls: Conn.Lookup(key) returns the fleet.Route of the key's partition as
// the connection's resolver sees the fleet, as Lookup does on every reader
// of the fleet (the node, fleet.Observer, router.Client).
//
// # Server side
//
// A Server wraps the node (*ownership.Node) of a gRPC server: its unary
// and stream interceptors (ServerOptions) admit a call only on the owner of
// its key, held like router.Router.Do's work (counted as in flight, so that
// a planned move drains it before the partition moves), with the
// partition's token in the handler's context (fence.FromContext). A call
// for a partition in handoff waits up to ServerConfig.HandoffWait. Any
// other call is refused, never forwarded: the caller's Client, which knows
// the call's deadline and holds its retry budget, sends it to the owner
// itself, with no extra hop.
//
// Refusals travel as gRPC status codes (Unavailable, or Aborted for a
// stale write) whose one detail is a tenurepb.Refusal (proto message
// tenure.v1.Refusal, tenurepb/tenure/v1/refusal.proto): its kind, the
// partition, the owner, its address and epoch, and the ring version. Any
// gRPC client, in any language, reads the next owner from the status's
// details; RefusalOf reads it in Go. Each kind's code, proto value,
// retryability and hint are one row of tenure's refusal table, which the
// HTTP wire shares (internal/refusal/table.go; the README shows it); the
// Client retries the kinds the table says are retryable, whatever a
// refusal's own retryable field says, and a call is refused with the kind
// the HTTP router would answer its request with. A handler that returns the error of a
// write its store refused as stale (fence.ErrStale), or of work cut short
// because its tenure ended (ownership.Ended), or of etcd unavailable, has
// its error turned into the retryable refusal by the interceptor, as
// router.WriteError does over HTTP, so that the Client retries the call at
// the new owner. A call without a usable key fails with
// codes.InvalidArgument (ErrNoKey, ErrInvalidKey).
//
// # mTLS
//
// Routing adds nothing to gRPC's transport security: use the standard
// credentials on both sides. Each node serves with a certificate for the
// address it advertises (ownership.Config.Addr, which the Client dials)
// and requires client certificates; clients present theirs and verify the
// nodes' against the fleet's CA:
//
//	// node
//	creds := credentials.NewTLS(&tls.Config{
//		Certificates: []tls.Certificate{nodeCert},
//		ClientCAs:    caPool,
//		ClientAuth:   tls.RequireAndVerifyClientCert,
//		MinVersion:   tls.VersionTLS13,
//	})
//	srv := grpc.NewServer(append(rs.ServerOptions(), grpc.Creds(creds))...)
//
//	// client
//	creds := credentials.NewTLS(&tls.Config{
//		Certificates: []tls.Certificate{clientCert},
//		RootCAs:      caPool,
//		MinVersion:   tls.VersionTLS13,
//	})
//	conn, err := c.NewConn(grpcroute.Target("counter"), grpc.WithTransportCredentials(creds))
//
// The server name a connection verifies is the host of the address it
// dials (the owner's advertised address), so each node's certificate
// names its own host or IP address (TestMutualTLS). grpc.WithAuthority
// makes every connection verify the one name it gives instead, for nodes
// that share a certificate name. A connection whose handshake fails is
// logged at warning level with its error, by ClientConfig.Logger; the
// calls for its node's keys wait for it until their deadlines.
//
// # Metrics
//
// ServerConfig.Metrics and ClientConfig.Metrics take an optional
// prometheus.Registerer (metrics.go lists the series); NewServer and NewClient
// fail with ErrMetrics if they cannot be registered; Close unregisters
// them.
package grpcroute
