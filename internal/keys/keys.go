// Package keys is the etcd key layout shared by tenure's packages:
//
//	<prefix>spec                 JSON fleet spec (partitions, load factor, ring algorithm,
//	                             the resize in progress)
//	<prefix>members/<nodeID>     JSON Member, lease = node Session
//	<prefix>drained/<nodeID>     JSON fleet.Mark: an operator's drain mark; the ring excludes the node
//	<prefix>claims/<partition>   JSON Claim {node, since} (or the bare node
//	                             ID, Since unknown), lease = owner's Session;
//	                             epoch = ModRevision (see ClaimEpoch)
//	<prefix>claims/resize/<id>/record     JSON Resize: a partition-count resize in progress
//	<prefix>claims/resize/<id>/moving/<s> the resize driver asks group s to move
//	<prefix>claims/resize/<id>/done/<s>   group s follows the resize's target count
//	<prefix>claims/resize/<id>/back/<s>   group s moved back (an aborted resize)
//	<prefix>claims/resize/<id>/fenced/<s> group s's replaced partitions are retired at every fencer
//	<prefix>leader/<name>/...    election keys
//	<prefix>fence/<scope>        highest epoch admitted, for stores in etcd
//	<prefix>audit/<id>           JSON audit record of an operator action; ids
//	                             sort by time (see AuditID)
//	<prefix>placement/<p>        JSON Placement: partition p placed on a node by
//	                             an operator's pin, a balancer's move or a
//	                             migration's step
//	<prefix>load/<nodeID>        the node's load report, lease = node Session
//	<prefix>handoff/<nodeID>     empty, lease = node Session: the put in every
//	                             deletion of the node's claims or member key,
//	                             so that etcd refuses the deletion while it
//	                             refuses puts (NOSPACE; see Layout.Handoff)
//	<prefix>balance/suspended    JSON BalanceSuspend: an operator suspended the balancer
//	<prefix>balance/pass         JSON BalancePassRecord: the balancer's last applied pass
//	<prefix>migration            JSON MigrationRecord: a ring-algorithm migration that runs
//
// The default prefix is "/tenure/<cluster>/".
package keys

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Layout builds and parses the keys of one cluster. The zero Layout is not
// useful; use New or ForPrefix.
type Layout struct {
	prefix, members, claims, drained string
}

// DefaultPrefix returns "/tenure/<cluster>/".
func DefaultPrefix(cluster string) string { return "/tenure/" + cluster + "/" }

// New returns the layout under DefaultPrefix(cluster).
func New(cluster string) Layout { return ForPrefix(DefaultPrefix(cluster)) }

// ForPrefix returns the layout under prefix, adding a trailing '/' if absent.
func ForPrefix(prefix string) Layout {
	if !strings.HasSuffix(prefix, "/") {
		prefix += "/"
	}
	return Layout{prefix: prefix, members: prefix + "members/", claims: prefix + "claims/", drained: prefix + "drained/"}
}

// For returns the layout of a configuration that names a cluster and may
// override its prefix: ForPrefix(prefix) if prefix is set, else New(cluster).
func For(cluster, prefix string) Layout {
	if prefix != "" {
		return ForPrefix(prefix)
	}
	return New(cluster)
}

// ErrNoCluster is returned by CheckFleet for a configuration that names no
// cluster: neither a cluster nor a prefix.
var ErrNoCluster = errors.New("Cluster or Prefix must be set")

// CheckFleet reports whether cluster and prefix, as a configuration's
// Cluster and Prefix fields, name a fleet whose keys For can lay out: one
// of them set, a cluster without '/' or NUL, a prefix without NUL. A
// configuration that names neither gets ErrNoCluster. Callers wrap the
// error in their own invalid-configuration error.
func CheckFleet(cluster, prefix string) error {
	switch {
	case cluster == "" && prefix == "":
		return ErrNoCluster
	case strings.ContainsAny(cluster, "/\x00"):
		return fmt.Errorf("cluster %q must not contain '/' or NUL", cluster)
	case strings.ContainsRune(prefix, 0):
		return fmt.Errorf("prefix %q must not contain NUL", prefix)
	}
	return nil
}

// Prefix returns the cluster prefix, ending in '/'.
func (l Layout) Prefix() string { return l.prefix }

// Members returns the prefix of all member keys.
func (l Layout) Members() string { return l.members }

// Member returns the key of node id.
func (l Layout) Member(id string) string { return l.Members() + id }

// MemberID returns the node ID of a member key.
func (l Layout) MemberID(key string) (string, bool) {
	id, ok := strings.CutPrefix(key, l.Members())
	return id, ok && id != ""
}

// Claims returns the prefix of all claim keys.
func (l Layout) Claims() string { return l.claims }

// Claim returns the claim key of partition p.
func (l Layout) Claim(p int) string { return l.Claims() + strconv.Itoa(p) }

// ClaimPartition returns the partition of a claim key.
func (l Layout) ClaimPartition(key string) (int, bool) {
	s, ok := strings.CutPrefix(key, l.Claims())
	if !ok {
		return 0, false
	}
	return canonicalPartition(s)
}

// canonicalPartition parses a partition number written in canonical
// decimal (no sign, no leading zero).
func canonicalPartition(s string) (int, bool) {
	if s == "" || (len(s) > 1 && s[0] == '0') {
		return 0, false
	}
	p, err := strconv.Atoi(s)
	if err != nil || p < 0 {
		return 0, false
	}
	return p, true
}

// DrainedPrefix returns the prefix of all drain marks.
func (l Layout) DrainedPrefix() string { return l.drained }

// Drained returns the key of node id's drain mark.
func (l Layout) Drained(id string) string { return l.drained + id }

// DrainedID returns the node ID of a drain mark's key.
func (l Layout) DrainedID(key string) (string, bool) {
	id, ok := strings.CutPrefix(key, l.drained)
	return id, ok && id != ""
}

// Audits returns the prefix of all audit records.
func (l Layout) Audits() string { return l.prefix + "audit/" }

// Audit returns the key of the audit record with the given id (see AuditID).
func (l Layout) Audit(id string) string { return l.Audits() + id }

// AuditID returns the id of an audit record written at t: t's Unix time in
// nanoseconds, zero-padded to 19 digits so that ids sort by time, a '-' and
// a caller-chosen suffix that keeps two records of the same instant apart.
func AuditID(t time.Time, suffix string) string {
	return fmt.Sprintf("%019d-%s", t.UnixNano(), suffix)
}

// Leaders returns the prefix of all elections.
func (l Layout) Leaders() string { return l.prefix + "leader/" }

// Leader returns the prefix of the election named name.
func (l Layout) Leader(name string) string { return l.prefix + "leader/" + name + "/" }

// Spec returns the key of the fleet's spec.
func (l Layout) Spec() string { return l.prefix + "spec" }

// Fences returns the prefix of all fence floor keys.
func (l Layout) Fences() string { return l.prefix + "fence/" }

// Placements returns the prefix of all placement keys.
func (l Layout) Placements() string { return l.prefix + "placement/" }

// Placement returns the placement key of partition p.
func (l Layout) Placement(p int) string { return l.Placements() + strconv.Itoa(p) }

// PlacementPartition returns the partition of a placement key, by the
// rules of ClaimPartition.
func (l Layout) PlacementPartition(key string) (int, bool) {
	s, ok := strings.CutPrefix(key, l.Placements())
	if !ok {
		return 0, false
	}
	return canonicalPartition(s)
}

// Loads returns the prefix of all load reports.
func (l Layout) Loads() string { return l.prefix + "load/" }

// Load returns the load report key of node id.
func (l Layout) Load(id string) string { return l.Loads() + id }

// LoadID returns the node ID of a load report key.
func (l Layout) LoadID(key string) (string, bool) {
	id, ok := strings.CutPrefix(key, l.Loads())
	return id, ok && id != ""
}

// Member is the value of a member key.
type Member struct {
	ID   string            `json:"id"`
	Addr string            `json:"addr"`
	Meta map[string]string `json:"meta,omitempty"`
	// Weight is the node's capacity weight; 0 (absent) means 1.
	Weight int `json:"weight,omitempty"`
	// Prepares says that the node prepares the partitions that planned
	// moves give it (a warm handoff) and puts its readiness keys: a holder
	// waits for those of a successor that prepares, and for no other.
	Prepares bool `json:"prepares,omitempty"`
	// TTLSeconds is the TTL etcd granted the lease the member key is
	// bound to, in etcd's unit, seconds; 0 (absent, as a build that
	// publishes none writes it) means unknown. etcd expires a lease no
	// sooner than its TTL after its last renewal, so that a node that
	// takes over the member's partitions when the lease ends can bound how
	// long ago the member last renewed it.
	TTLSeconds int64 `json:"ttl,omitempty"`
	// Build is the node's build (its module version, or "devel"); empty
	// for a build that publishes none.
	Build string `json:"build,omitempty"`
	// Features are the protocol features the node's build understands
	// (see fleetview's feature names); none for a build that publishes
	// none, which understands the base protocol only.
	Features []string `json:"features,omitempty"`
}

// The origins of a Placement.
const (
	OriginPin       = "pin"       // an operator's pin
	OriginBalance   = "balance"   // a balancer's move
	OriginMigration = "migration" // a step of a ring-algorithm migration
)

// Placement is the value of a placement key.
type Placement struct {
	// Node is the node the partition is placed on.
	Node string `json:"node"`
	// Origin is OriginPin, OriginBalance or OriginMigration.
	Origin string `json:"origin"`
	// Rev is, for a move, the revision of the membership and load snapshot
	// it was computed from.
	Rev int64 `json:"rev,omitempty"`
	// Time is when the entry was written: Unix milliseconds by the
	// writer's clock, a move's balancer or a pin's operator (0: unknown).
	// A later balancer reads a move's cooldown from it.
	Time int64 `json:"t,omitempty"`
	// By and Reason are, for a pin, who pinned it and why.
	By     string `json:"by,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// EncodePlacement returns the JSON value of pl.
func EncodePlacement(pl Placement) string {
	b, _ := json.Marshal(pl) // cannot fail: strings and an integer
	return string(b)
}

// DecodePlacement parses a placement value. It fails for a value that is
// not a JSON Placement or whose origin is unknown.
func DecodePlacement(v []byte) (Placement, error) {
	var pl Placement
	if err := json.Unmarshal(v, &pl); err != nil {
		return Placement{}, err
	}
	if pl.Origin != OriginPin && pl.Origin != OriginBalance && pl.Origin != OriginMigration {
		return Placement{}, fmt.Errorf("unknown placement origin %q", pl.Origin)
	}
	return pl, nil
}

// EncodeMember returns the JSON value of m.
func EncodeMember(m Member) (string, error) {
	b, err := json.Marshal(m)
	return string(b), err
}

// DecodeMember parses a member value.
func DecodeMember(v []byte) (Member, error) {
	var m Member
	err := json.Unmarshal(v, &m)
	return m, err
}

// Claim is the value of a claim key: the owner and the wall-clock time at
// which it created the claim. The time is informational only (it comes
// from the owner's clock); the claim's epoch is ClaimEpoch's.
type Claim struct {
	Node  string    `json:"node"`
	Since time.Time `json:"since"`
}

// EncodeClaim returns the value of a claim created by node at since.
func EncodeClaim(node string, since time.Time) string {
	b, _ := json.Marshal(Claim{Node: node, Since: since.UTC()}) // cannot fail: a string and a time
	return string(b)
}

// DecodeClaim parses a claim value, either form: the JSON Claim, or the
// bare node ID (as an operator may write one by hand; Since zero). A value
// that does not start with '{' or that is not a JSON object naming a node
// is a bare ID.
func DecodeClaim(v []byte) Claim {
	if bytes.HasPrefix(v, []byte("{")) {
		var c Claim
		if err := json.Unmarshal(v, &c); err == nil && c.Node != "" {
			return c
		}
	}
	return Claim{Node: string(v)}
}

// CheckFencer reports an error when f keeps its floors in etcd under a
// fence prefix (an etcdfence.Store reports it with FencePrefix) other than
// fences, the fleet's own "<prefix>fence/": such a fencer would compare a
// fleet's tokens with another fleet's floors. A fencer that reports no
// prefix (a SQL fencer, a function) passes. Callers wrap the error in their
// own foreign-fencer error.
func CheckFencer(f any, fences string) error {
	fp, ok := f.(interface{ FencePrefix() string })
	if !ok || fp.FencePrefix() == fences {
		return nil
	}
	return fmt.Errorf("%T keeps its floors under %q, not under the fleet's %q", f, fp.FencePrefix(), fences)
}
