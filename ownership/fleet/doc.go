// Package fleet is the read side of a tenure fleet, for whoever is not one
// of its nodes: the router's Client, downstream services that verify
// tokens, and operators (examples/tenurectl is its CLI). It reads the keys
// the nodes of the ownership package write (members, drain marks, claims,
// the spec, election candidates) and takes the operator's audited actions;
// it holds no lease and claims nothing.
//
// # Routes
//
// Route is the one owner hint of the library: the partition, the node that
// owns it, that node's address and the epoch of its claim. A Node
// (ownership.Node.Lookup) and an Observer compute it from the same reader
// by the same rule: the holder of the partition's claim while one stands,
// with an empty address if it advertised none (it alone can admit the
// partition's work until its claim ends), otherwise the ring's owner,
// which is about to claim it. For one state of the fleet they name the
// same owner.
//
// # Observer
//
// Observe follows the fleet's members, drain marks and claims: all read at
// one revision, watched from the next, read again after a compaction or a
// failed watch, and decoded by the rules every node follows (a member key
// whose ID is not a valid node ID is ignored, an undecodable member value
// counts with an empty address, a claim value is JSON {"node", "since"} or
// the bare node ID, a claim outside [0, P) is reported and never applied).
// Lookup(key) and LookupPartition(p) read its immutable routing table
// without a lock, as on every reader of the fleet.
// While its etcd connection is down it asks the client to reconnect every
// 250ms, so it follows the fleet again as soon as etcd serves.
//
// An Observer is also an httpfence.Verifier: Observer.Verify admits a
// partition token only if its epoch is the epoch (the ModRevision) of
// the partition's claim, so a downstream service that can reach etcd refuses
// made-up tokens without a round trip per request. Nodes configured with
// ownership.Config.Signer sign every tenure's token instead, for services
// that hold only a public key.
//
// # Operator
//
// The ring is a pure function of the spec and the members that are not
// drained: an operator's drain mark drained/<id> takes a node out of every
// node's and client's ring while it stays a member, alive and serving
// nothing, and its partitions hand off as planned moves. Force release of
// a fence scope deletes its claim (or its leader key: the first
// created of its election) under If(epoch unchanged: a claim's ModRevision,
// a leader key's CreateRevision), so it never
// releases a newer holder; the holder's tenure ends as for a lost claim,
// and the next claim's higher epoch fences the old holder out. Every
// operator action writes an audit record audit/<id> in the same
// transaction. The Operator also lists the members, partitions and
// leaders, looks up a key's partition (Lookup), reports the placement and
// the balancer's state (Placement), and summarizes the fleet's health and
// spec (Status), each read at one etcd revision; ReadSpec reads the spec
// alone.
//
// # Changing the ring algorithm
//
// MigrateAlgorithm moves a running fleet to another ring algorithm as
// planned moves in bounded steps (placements of origin "migration"), then
// sets the spec's algorithm in one transaction that moves nothing; the
// balancer pauses meanwhile, operator pins are kept, every step is
// audited, and a migration interrupted at any step resumes when it runs
// again. Commands that need a protocol feature (Pin, the balancer's
// moves, MigrateAlgorithm) are refused with an error (ring.ErrFeatureUnsupported) naming
// the live members whose builds lack it (see MemberStatus.Build and
// Features, Status.Features and Requires).
package fleet
