// Package ownership assigns every partition of a key space to exactly one
// node of a fleet and makes each node's tenure over a partition visible as an
// epoch: the fencing token that stores check.
//
// # Protocol
//
// Every process runs one Node. Join opens the node's Session (one etcd
// lease), registers the member key members/<id> with create-if-absent (a
// second live process with the same ID gets a *DuplicateMemberError), reads
// members and claims at one revision R and watches both from R+1.
//
// The ring (package ring) is a pure function of the sorted member IDs and
// their capacity weights, the partition count, the load factor and the
// ring algorithm, so every node that sees the same members computes the
// same owner for every partition. The partition count, load factor and
// algorithm are the fleet's spec, stored once in etcd by the first node
// that joins (a new fleet records ring.AlgorithmWeighted unless that node
// asserts another); Join refuses a node whose Config.Ring contradicts it
// (*ring.SpecMismatchError) unless Config.AdoptSpec is set, a node that
// leaves the algorithm unset adopts the fleet's, and a weight other than 1
// in a fleet of ring.AlgorithmBounded is refused (ErrWeightUnsupported).
// A node follows the spec while it runs: an operator's ring-algorithm
// migration (fleet.Operator.MigrateAlgorithm) changes the algorithm the
// spec records, and every node computes the ring by the new one from the
// revision it was written at.
//
// Each node publishes its build and the protocol features it understands
// in its member key; the spec records the features in use (its requires).
// A node whose build lacks one is refused at Join, and at a rejoin, with a
// error naming it (errors.Is ring.ErrFeatureUnsupported): it
// reads the spec after it writes its member key, and deletes the key
// again, while a command that records a feature checks that no member key
// was written since it read them.
//
// For each partition the ring gives it and nobody claims, a node creates the
// claim claims/<p> with If(CreateRevision == 0), bound to its lease, many
// partitions per transaction. The epoch is the claim's ModRevision: a
// claim is written only when its holder changes (created, or handed over
// by its holder, step 8 below), so epochs of successive owners strictly
// increase, and every reader (node, Observer, Client, the stores' claim
// guards) reads it so. Before any work runs under
// a new epoch, the node advances every Fencer (the stores' fence floors) to
// it; then it calls OnAcquired, and it admits work once OnAcquired has
// returned, so that state the callback loads is in place before the first
// call. Callbacks take one Event and follow one rule: start callbacks
// receive the context of what began, which ends with it; end callbacks say
// why.
//
// A store that refuses the new epoch as stale (its floor is above it) has
// seen a newer one. If etcd has reached the floor's revision, the claim is
// useless: the node ends the tenure, deletes the claim and claims again,
// at an epoch above the floor. If the floor is above etcd's revision too,
// no claim of this etcd's history made it: etcd's revisions went
// backwards, as after a restore from a snapshot without --bump-revision.
// The node then reports a *RewindError (ErrRewound) in Status, counts it
// and logs it once, keeps the claim unserved and advances the fencers
// again with backoff, until etcd's revision passes the floor.
//
// Each partition has one state on the node (idle, claiming, fencing,
// starting, serving, draining, releasing, deleting, and the waits between
// retries), written by the node's event loop; Hold reads it, and the
// routing snapshot and the callbacks derive from it. The node serves a
// partition while it admits work for it. While the node is still acquiring
// a partition the ring gives it, Hold's *WrongOwnerError says so
// (Acquiring), and the router and grpcroute wait, as for a handoff, up to
// their handoff wait and while the caller's context lasts.
//
// # Order of events
//
// One tenure of one partition on its node goes through these events, in
// this order. Hold is what Hold answers (Acquiring, Releasing: its
// *WrongOwnerError's fields; the router and grpcroute wait those out, and
// retry the next owner after Releasing); Local and Ready are what Lookup
// and Ready say of the partition.
//
//	step  event                                               phase after  Hold           Local, Ready
//	1     claim created, If(CreateRevision == 0): the epoch   fencing      Acquiring      no
//	2     every Fencer raised to the epoch                    starting     Acquiring      no
//	3     OnAcquired called                                   starting     Acquiring      no
//	4     OnAcquired returned, or Config.AcquiredTimeout      serving      admits         yes
//	      passed since it was queued (logged, counted)
//	5     the ring moved the partition away (a ring change,   serving      admits         yes
//	      a drain, Close): the successor prepares it
//	      (OnPrepare), within Config.WarmTimeout
//	6     admission ends                                      draining     Releasing      no
//	7     the work admitted before 6 finished, or             releasing    Releasing      no
//	      Config.DrainTimeout passed (logged): context
//	      cancelled (ErrMoved, ErrClosed), OnReleased called
//	8     OnReleased returned, or the drain timeout of 7      deleting     Releasing      no
//	      passed: claim handed over to the next owner, or
//	      deleted, If(ModRevision == epoch) (see below)
//	9     claim handed over (the next owner fences it: its    idle         not the owner  no
//	      step 2), or deleted (the next owner claims: its
//	      step 1)
//	loss  at any step from 1 to 8: the session ended, its     idle         SessionLost,   no
//	      safe deadline passed, or someone else deleted                    or not the
//	      the claim: context cancelled at once (ErrLost),                  owner
//	      no more work admitted; OnReleased called
//	      (ErrLost) if OnAcquired was, after it; the
//	      claim goes with the lease (if no one deleted it)
//
// At step 8, once the spec requires the "handover" feature (a node records
// it once every member publishes it), the holder puts the claim with the
// next owner's ID and lease, If(its claim at its epoch, the next owner's
// member key on that lease, the spec unchanged): one etcd write. Refused,
// during a resize, or without the feature, it deletes the claim.
//
// Callbacks run one at a time, in this order: OnAcquired always precedes
// the OnReleased of its tenure, also when the tenure ends while OnAcquired
// runs (at step 3 a move away goes to step 6 at once, and a loss ends the
// tenure at once, but OnReleased waits for OnAcquired to return); a tenure
// that ends before step 2 gets neither, and its claim is deleted. Step 5
// is skipped when the successor does not prepare (no OnPrepare, or
// Config.WarmTimeout negative). The next owner sees the deletion on its
// watch and claims at once: a planned move costs a few etcd round trips,
// not a lease TTL, and the work in flight finishes where it started. With
// Config.AcquiredTimeout negative, or without OnAcquired, step 4 follows
// step 2 at once and OnAcquired is called after it, concurrently with the
// first calls.
//
// # Warm handoff
//
// A planned move (a ring change, a drain, a graceful leave, whatever moved
// the partition) has a prepare phase, step 5 of the table, so that a node
// that keeps state per partition does not start cold. The next owner, which
// sees the holder's claim on a partition the ring now gives it, calls
// Callbacks.OnPrepare with the partition and the holder, on a goroutine
// of its own, while the holder keeps serving. It holds no token: it reads,
// and writes nothing under the partition's tenure. When OnPrepare returns,
// it puts ready/<p>/<node> = the holder's epoch under its lease; the
// holder watches those keys and, once every partition of the move has
// its successor's, goes on with steps 6 to 8 for all of them together (a
// handful of writes however the preparations spread), serving them until
// then. If Config.WarmTimeout (3s by default) passes first, it goes on
// anyway: the partitions not prepared move cold. The successor then holds
// the claim at a new epoch, its fencers raise the floors, and OnAcquired
// says in Event.Prepared whether, and when, it prepared the partition. The
// pattern (examples/counter): prepare from a snapshot, then, in
// OnAcquired, under the new token, read what changed since the snapshot
// instead of loading everything, before the partition admits a call. A move that
// the ring calls off meanwhile cancels the preparation (ErrMoveCalledOff);
// a second ring change that picks another successor starts that one's
// preparation under the deadline of the first. Correctness never depends
// on the preparation: the new owner's epoch fences the old one as in any
// move, and a crash is a failover, never a warm move.
//
// A loss is not a handoff. When the Session ends (the lease is lost, or its
// safe deadline passes without an acknowledged renewal), every partition
// context is cancelled at once (ErrLost), OnReleased fires with ErrLost,
// and the node rejoins with a new Session, hence new claims and new epochs.
// The old claims go with the old lease. A claim deleted by someone else
// (an operator's force release) ends that tenure the same way. Until the
// node has rejoined, Hold answers with a *WrongOwnerError whose SessionLost
// is set (errors.Is ErrLost), and Lookup never names this node as an owner.
//
// A rejoin waits on nothing an etcd outage leaves behind: the node asks
// its etcd client to reconnect every 250ms (gRPC's own backoff grows to
// minutes), retries a failed attempt within 250ms, takes over its old
// member key in the same transaction (the fleet never sees it leave),
// deletes the claims of its old lease itself and revokes that lease in the
// background. TestRecoveryAfterEtcdOutage (etcd killed for 5s and 30s):
// 0.05-0.21s from etcd serving to every node ready. The fleet's reader (of
// a Node, a fleet.Observer, a router.Client) reconnects the same way: its
// watches wait for the connection; TestObserverAfterEtcdOutage: 0.06-0.18s
// to a current view.
//
// Work whose tenure ended under it (its context is done, or a store
// refused its token) should return an error that says so: the context's
// cause, which wraps ErrMoved, ErrLost or ErrClosed, or the store's error,
// which wraps fence.ErrStale. The router turns those into an answer that
// the caller retries at the next owner.
//
// Close leaves gracefully: it deletes the member key, hands every partition
// off as above, and revokes the lease.
//
// # Routing
//
// Lookup maps a key to its fleet.Route (partition, owner, address, epoch)
// without locks or allocation (an immutable snapshot behind an atomic
// pointer; Changed signals each new one): its claim's holder while one
// stands, else the ring's owner (fleet.Observer's rule); a node marks what
// it serves Local and never names itself for a partition it does not serve.
//
// # Reading and operating the fleet from outside
//
// A node reads the members, drain marks and claims through the same reader
// as the fleet package's Observer, and routes by the same rule, so that a
// node and an outside client (such as the router's Client) name the same
// owner for every partition. The fleet package's Operator drains nodes,
// force-releases claims and leader keys, and keeps the audit log; a
// drained node stays a member, alive and serving nothing, and a claim
// deleted by a force release ends that tenure as a lost claim does. The
// ring package computes the assignment itself: a pure function of the
// fleet's spec and its members that are not drained.
//
// # Changing the partition count
//
// A running fleet changes its partition count from F to T = F times or
// divided by a power of two by a resize (fleet.Operator.Resize, tenurectl
// spec resize); data in the stores stays where it is. With small =
// min(F, T), group s holds the partitions s + i*small of both counts
// (64 -> 256 splits 17 into 17, 81, 145 and 209). Every reader (Node,
// fleet.Observer, router.Client, grpcroute.Conn, tenurectl) puts a key of
// hash h in partition h mod T if its group h mod small is done, else
// h mod F; a number shared by a source and a target is told apart by its
// group's state, its tenures by their epochs. The spec records the resize
// in progress, and its keys live under the claim prefix, so that readers
// receive them in revision order with the claims:
//
//	<prefix>claims/resize/<id>/record     the resize in progress
//	<prefix>claims/resize/<id>/moving/<s> the driver asks group s to move
//	<prefix>claims/resize/<id>/done/<s>   group s follows the target count
//	<prefix>claims/resize/<id>/back/<s>   group s moved back (an abort)
//	<prefix>claims/resize/<id>/fenced/<s> group s's last change is fenced
//
// The driver (audited, one log line per step) writes the resize into the
// spec, then asks at most the budget of groups (8 by default) to move at
// once. Each holder of a source of a moving group hands it off like any
// planned move, and nobody claims it again. Once no source of the group is
// claimed, every node that sees so tries the transaction that marks the
// group done: if the spec is the one it knows, moving/<s> stands,
// done/<s> does not and every source's claim is absent, it creates
// done/<s>, deletes moving/<s> and moves the placements: a pin (or the
// balancer's move) on a parent becomes one on each child; on a merge the
// target keeps the placement of source s, the one with its number, and
// those of the other sources are deleted. Its comparisons make it
// idempotent, and since every node tries it, neither a driver that
// stopped nor a source holder that crashed (its claim goes with its
// lease) stalls a group. The ring of T partitions then gives the targets
// their owners, who claim them, and the first of them to have retired
// the sources (below) marks the group fenced. Once every group is done
// and fenced, the driver writes the spec's count T without the resize and
// deletes the resize's keys, in one transaction that compares the spec.
// The balancer pauses its passes meanwhile (package balance).
//
// Every claim compares the spec's ModRevision as the node knows it, so a
// node that has not seen the spec's last change claims nothing, and during
// a resize its group's state: done/<s> absent for a source partition,
// present for a target. A group's done key is created after every source
// claim ended and before any target claim, so every source epoch is below
// its CreateRevision and every target epoch above. A target's owner, after
// its claim and before it admits work, advances every Fencer to its own
// token and also retires each source of its group: it advances
// fence.PartitionScope(source) to the done key's CreateRevision. The
// parent's scope is raised to the split's revision before any child
// serves (the children's scopes before a merged partition serves), so a
// paused holder of a parent (or of a child, across a merge) is refused at
// every store whatever key it writes; see the fence package.
//
// Abort (fleet.ResizeOptions.Abort) returns the resize to F the same way:
// each done group moves back as planned moves (one transaction deletes
// done/<s> and creates back/<s>, moving the placements back), and the
// sources' new owners retire the targets at back/<s>'s revision.
//
// A resize needs the "resize" feature of every live member (an older
// build is refused, see above). A node that joins during one follows the
// rule; one started with a Config.Ring.Partitions other than the spec's
// is refused at Join (*ring.SpecMismatchError naming the count a resize
// in progress moves to) unless Config.AdoptSpec is set, and so are a
// fleet.Observer and a router.Client configured so. Each node logs
// "resize: group done" (or "resize: group moved back"; fields resize,
// group, from, to, ended and begun as ranges, revision) and "resize:
// group fenced", and counts tenure_resize_groups_moved_total and
// tenure_resize_group_duration_seconds.
//
// # Operability
//
// Metrics are registered with the prometheus.Registerer of Config.Metrics
// (nil: none; never the global registry) under the const label node=<NodeID>,
// so that several nodes of one process share a registry. Join registers
// them, and the session metrics that every Session of the node shares
// (unless Config.Session.Metrics is set), and fails with
// ErrMetrics if it cannot; they are unregistered when the node stops, so a
// node re-created in the process registers again. No label is per key,
// partition or lease.
//
//	name                                        type       labels  meaning
//	tenure_partition_acquisitions_total         counter            partitions acquired (claimed, fenced; OnAcquired queued)
//	tenure_partition_releases_total             counter    reason  served tenures ended, by OnReleased's reason: moved, lost or closed
//	tenure_partition_claim_conflicts_total      counter            claims beaten by another node's claim (contention)
//	tenure_partition_handoff_duration_seconds   histogram          planned release (moved, closed): end of admission (drain included) to the claim's hand-over or deletion
//	tenure_partition_prepare_duration_seconds   histogram  outcome planned release: start of the move to the end of admission, the successor preparing: warm (ready) or cold
//	tenure_partition_unowned_duration_seconds   histogram          at each acquisition: from seeing the partition assigned to it and claimed by no other node to acquiring it (claimed, fenced)
//	tenure_partition_acquired_timeouts_total    counter            tenures admitted before their OnAcquired returned: Config.AcquiredTimeout passed
//	tenure_partition_failovers_total            counter    cause   partitions taken over after their holder lost its session: lease_ended or rejoined; never a planned move
//	tenure_partition_failover_duration_seconds  histogram          lease_ended, holder's TTL known: from the holder's last renewal (bounded: expiry seen minus TTL) to acquiring it, at least
//	tenure_partition_takeover_duration_seconds  histogram          every failover: from seeing the holder's claim deleted to acquiring it
//	tenure_partitions_owned                     gauge              partitions served
//	tenure_partition_oldest_held_seconds        gauge              age of the oldest tenure served, from its claim's creation
//	tenure_fencer_failures_total                counter            failed fencer advances (retried)
//	tenure_fence_rewinds_total                  counter            fencer advances refused by a floor above the epoch and etcd's revision: etcd's revisions went backwards
//	tenure_partitions_rewound                   gauge              partitions claimed but unserved because of such a floor (0 unless etcd was restored without --bump-revision)
//	tenure_forced_releases_total                counter            claims deleted by someone else while the lease lived (checked with etcd)
//	tenure_drains_total                         counter            times this node saw itself drained
//	tenure_callback_queue_length                gauge              callbacks queued for the dispatcher
//	tenure_etcd_alarm                           gauge      alarm   1 while etcd refuses this node's writes (NOSPACE), learned from its own writes only (a node that writes nothing does not notice); planned releases wait (nospace.go)
//	tenure_resize_groups_moved_total            counter            groups of a resize this node moved: marked done, or moved back by an abort
//	tenure_resize_group_duration_seconds        histogram          those groups: from this node seeing the group's moving key to moving it (the handoffs included)
//	tenure_session_*                            (see the election package's Operability section)
//
// A ChanCallbacks adapter counts its drops itself (its third result); the
// node cannot see them, so it exports the length of its own callback queue.
//
// A failover is told by the node that takes the partitions over, from what
// etcd shows on its watch when the previous holder's claim is deleted.
// etcd deletes all the keys of a lease in one revision when the lease
// expires or is revoked: a claim deleted in the same revision as its
// holder's member key, bound to the same lease, is a failover with cause
// lease_ended (a crash, a pause past the TTL, a node cut off from etcd, a
// revoked lease). A claim deleted after its holder's member key moved to
// a new lease is one with cause rejoined: the holder lost its session
// while its lease lived on, rejoined and deleted its old claims. Any
// other deletion (a handoff, a graceful leave, which deletes the member
// key first, a drain, a pin, the balancer, a force release) is no
// failover. Members publish in their member key the TTL etcd granted
// their lease (ttl, in seconds; a member of an older build publishes none,
// and its failovers get no bound): etcd expires a lease no sooner than its
// TTL after its last renewal, so the time from the holder's last renewal
// to this node serving is at least the time from seeing the deletion to
// serving plus the TTL, which tenure_partition_failover_duration_seconds
// records. A holder that crashed or stopped served at most one renewal
// interval past its last renewal, so that its partitions went unserved
// for at least that value minus one renewal interval (a holder cut off
// from etcd serves until its safe deadline). A lease revoked by hand is
// told the same way, though its last renewal may be more recent. A node
// forgets the deletions it saw when it rejoins or reads the fleet again
// after its watch failed: someone may have claimed and released the
// partition in between, so a takeover across such a gap goes uncounted
// rather than a planned move counted (a paused node that takes its own
// partitions back after rejoining counts no failover; its
// tenure_session_losses_total does).
//
// Each event is classified once, where it is decided, and that one account
// feeds the OnReleased reason, the log line, the metric and the health
// answer. A session's end is named by election.LossCause: expired (the
// safe deadline passed: a pause past the TTL, an etcd outage), revoked,
// deleted (the member key removed by someone else while the lease lived)
// or closed. Claims and a member key that disappear while the session
// looks alive are told apart by what etcd records: if the session's lease
// is gone (election.Session.Check), they went with it, a session loss;
// if it lives, someone else deleted them, a forced release of each claim.
// A process resumed after a pause sees its expired lease's deletions on
// its watch, perhaps before its own timers fire; its safe deadline has
// passed by then, so that is a session loss, expired, never a forced
// release.
//
// Events go to Config.Logger with the fields node and lease, and for
// partitions count and partitions, written as ranges ("0-5,9,12-15"):
// joined, rejoined, left the cluster; "acquired N partitions" (epochs,
// longest_unowned_for, prepared: how many were prepared) once per claim
// transaction, when the last partition it claimed is acquired or has
// ended (fencers answer each partition in its own time); beside it, for the
// partitions of that transaction that were failovers, "took over N
// partitions whose holder's session was lost" (Warn; cause, holders,
// longest_since_renewal where bounded, as the failover histogram records
// it, and longest_takeover, from the claim's deletion); "acquired
// timeout" (Warn; count, partitions, epochs, timeout) when partitions
// admit work before their OnAcquired returned; "released N partitions"
// once
// per move batch (reason moved or closed), when its last claim is deleted
// or handed over (handed_over: how many were), with prepare, the longest
// prepare phase (start of the move to the end of admission), warm and
// cold, how many successors were ready or timed out, and handoff, how
// long it took from the end of admission; "the fleet requires the
// handover feature" once a node recorded it; "session lost:
// released N partitions" (Warn; cause, as counted); "forced release
// observed" (Warn, one line per batch of claims); drain and undrain
// observed; fence rejection (a fencer's fence.ErrStale: partition, scope,
// presented, current; Warn); claim conflict (Debug); a failed preparation
// (Warn: partition, holder, error); "etcd database full (NOSPACE alarm):
// keeping N partitions until it is disarmed" (Warn, once per wait;
// partitions, lease) while its planned releases wait for etcd to take
// puts, "etcd takes writes again: the planned releases that waited go on"
// (waited) when they resume, and, for a Close whose context ended
// meanwhile, "etcd database full (NOSPACE alarm): Close's context ended;
// N partitions go with the lease, as in a crash" (Warn). The node's sessions
// log with the node's logger and its node field: session opened, lost
// (cause) or closed, renewal attempts failed (Debug) and failing (Warn).
// Nothing the node logs carries a credential (it sees no DSN or password).
//
// Give the node clientv3.New(cfg.Session.ClientConfig(endpoints)), every
// member an endpoint: a member defragmented, replaced, upgraded or paused
// then costs no session or partition, only its requests' latency.
//
// The etcd client logs on its own (zap, JSON on standard error): silence
// it with clientv3.Config{..., Logger: zap.NewNop()}.
//
// Node.Status is a snapshot for dashboards (session, lease, served
// partitions with epochs, ring version, members); its Live and Ready back
// Node.HealthHandler's /livez and /readyz (200 or 503, a short JSON body
// whose reason names a lost session's cause, "no live session: lost
// (expired)").
//
// # Simulation
//
// A Node reaches etcd only through the Client interface (clientv3.KV,
// clientv3.Lease and clientv3.Watcher) and reads time only through
// Config.Clock, so the same code runs against an in-memory etcd under
// virtual time.
package ownership
