// Package election provides a node's Session — its one etcd lease, with a
// safe deadline — and leader election on it whose epoch is a fencing token.
//
// # Session
//
// Every node holds exactly one Session for its life. The session renews its
// lease itself every RenewInterval (TTL/3 by default, shorter for small
// TTLs) with KeepAliveOnce, and records the send time of each renewal on the
// monotonic clock. Its safe deadline is
//
//	send time of the last acknowledged renewal + granted TTL - SafetyMargin
//
// etcd cannot have started the lease's countdown before the renewal was
// sent, so the lease outlives the safe deadline. (The etcd client's own
// keepalive dates the deadline from the response, which is optimistic by a
// round trip.) The session ends shortly before the safe deadline if no newer
// renewal was acknowledged, whether or not etcd can be reached: Done is
// closed, Context is cancelled, and Err says why — ErrSessionExpired (the
// safe deadline passed, or etcd reported the lease missing after it),
// ErrLeaseLost (etcd reported it missing before: revoked), ErrKeyDeleted
// (its owner found a key bound to it deleted by someone else) or
// ErrSessionClosed. The end is classified once, where it happens, and
// LossCause names it for the loss metric, the log line and any health
// answer alike.
//
// Losing a session is for real losses. A renewal that fails or goes
// unanswered is followed by another attempt within the retry interval R =
// 100ms, alongside the ones still pending, so a hung etcd member does not
// hold the session; an etcd unavailability shorter than
// SessionConfig.OutageBound,
//
//	TTL - SafetyMargin - min(SafetyMargin/4, 100ms) - RenewInterval - R
//
// costs nothing. With the defaults that is 1.1s at TTL 2s and 5.47s at TTL
// 10s: an etcd leader failure of 1s, or 5s, is ridden out. SessionConfig
// explains how to choose a TTL.
//
// A member that stops answering while others still do (defragmenting,
// paused, cut off) holds only the attempts sent to it when the etcd client
// knows every member: SessionConfig.ClientConfig returns the client
// settings that go with a session (every member's endpoint, and gRPC
// keepalive derived from the TTL, so that the streams on such a member
// move to another).
//
// # Election
//
// An Election is one candidate's handle on a named election. Candidates put
// a key bound to their session's lease under "<prefix>leader/<name>/" (the
// layout of etcd's concurrency.Election); the candidate whose key has the
// lowest create revision leads. Campaign blocks until this candidate leads
// and returns a Term whose Token is
//
//	fence.Token{Scope: "leader/<name>", Epoch: create revision of the leader key}
//
// Epochs of successive leaders strictly increase, because etcd revisions do.
// The term's Context is cancelled the moment the term ends: on Resign, when
// the session ends (before its safe deadline), or when the leader key is
// deleted by someone else. Term.Cmp guards an etcd transaction so that it
// lands only while the term stands. Unlike etcd's concurrency.Election,
// Campaign returns as soon as the session ends while waiting, and never
// returns a term won with a dead lease.
//
// # Fencing a leader's stores
//
// A token fences nothing until the store has seen it. A store such as
// etcdfence.Store records a scope's floor on writes and on Advance, but
// only checks it on reads: a new leader whose first operation is a read
// (a read-modify-write: a counter, closing a billing period) has not
// raised the floor yet, and a previous leader that read before the change
// of leader and writes after the new leader's read still lands its write;
// the new leader then overwrites it, and an acknowledged update is lost.
// ElectionConfig.Fencers closes that gap the way ownership's Config.Fencers
// does for partitions: Campaign advances every fencer, in order, to the
// term's token before it returns the Term (and Run before OnElected and
// fn), so from the term's first read on, the previous leader is fenced out
// of every store behind a fencer. If a fencer fails, the term is resigned
// and Campaign returns an error wrapping ErrFence; Run campaigns again with
// backoff. Use the store itself as the fencer (an etcdfence.Store or a
// sqlfence.Fencer), as Example (fencedReadModifyWrite) shows.
//
// Run wraps the loop of a leader: campaign, run a function under the term,
// resign when it returns, campaign again. Its Hooks follow tenure's rule
// for callbacks: start callbacks receive the context of what began, which
// ends with it (OnElected, the term's); end callbacks say why (OnEnded).
// Leader and Observe report the current leader and stream changes,
// including "no leader", across etcd compactions.
//
// A leader updates its published value (its address, its progress)
// without ending its term with Term.Proclaim: a put of the leader key
// guarded by the term's epoch, so a stale leader's proclaim fails
// (ErrKeyDeleted, ErrNotLeader) and never overwrites its successor's.
//
// # Operability
//
// Metrics are registered with a prometheus.Registerer the user passes, never
// the global one. The sessions opened with one SessionConfig.Metrics share
// their metrics, because a node opens a new Session after each loss; an
// Election registers its own metrics with ElectionConfig.Metrics, under the
// const labels election and candidate, and Close unregisters them.
//
//	name                                         type       labels                meaning
//	tenure_session_renewal_duration_seconds      histogram                        send to acknowledgement of acknowledged renewals
//	tenure_session_renewals_total                counter                          acknowledged renewals
//	tenure_session_renewal_failures_total        counter                          renewal attempts failed or unanswered
//	tenure_session_safe_deadline_margin_seconds  gauge                            time left before the live session's safe deadline
//	tenure_session_opened_total                  counter                          sessions opened
//	tenure_session_losses_total                  counter    cause                 sessions ended: expired, revoked, deleted, closed, other
//	tenure_election_is_leader                    gauge      election, candidate   1 while this candidate holds a term
//	tenure_election_terms_total                  counter    election, candidate   terms won and handed out
//	tenure_election_campaign_failures_total      counter    election, candidate   campaigns failed (not by the caller's ctx)
//	tenure_election_fencer_failures_total        counter    election, candidate   fencer advances failed
//	tenure_election_term_duration_seconds        histogram  election, candidate   length of each term, observed at its end
//	tenure_election_forced_releases_total        counter    election, candidate   terms ended by someone else deleting the leader key
//
// Events go to the configured hclog.Logger (SessionConfig.Logger,
// ElectionConfig.Logger) with the fields lease, election, candidate and
// epoch: session opened, session lost (cause) or closed, renewal attempt
// failed (Debug: latency, remaining margin), renewal failing with the
// safe-deadline margin below half of OutageBound (Warn, once per outage),
// renewal recovered, elected, fencers advanced, fencer failed, term ended
// (reason resigned, session_lost or key_deleted) and leader observed
// changed. No credential passes through this package.
//
// Session.Status and Election.Status are snapshots for health checks and
// dashboards: renewals, failures, the last renewal's latency and the margin
// left; whether this candidate leads, under which epoch and since when, and
// the leader it observed last.
//
// # Dependencies
//
// The package reaches etcd only through clientv3.KV, clientv3.Lease and
// clientv3.Watcher (a *clientv3.Client is all three) and reads time only
// through a Clock, so that a simulator can run it against an in-memory etcd
// under virtual time.
package election
