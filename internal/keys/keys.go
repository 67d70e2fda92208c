// Package keys is the etcd key layout shared by tenure's packages:
//
//	<prefix>spec                 JSON fleet spec (partitions, load factor, ring algorithm)
//	<prefix>members/<nodeID>     JSON Member, lease = node Session
//	<prefix>drained/<nodeID>     JSON ownership.DrainMark: an operator's mark; the ring excludes the node
//	<prefix>claims/<partition>   JSON Claim {node, since} (or the bare node
//	                             ID, Since unknown), lease = owner's Session;
//	                             epoch = CreateRevision
//	<prefix>leader/<name>/...    election keys
//	<prefix>fence/<scope>        highest epoch admitted, for stores in etcd
//	<prefix>audit/<id>           JSON audit record of an operator action; ids
//	                             sort by time (see AuditID)
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
	if !ok || s == "" || (len(s) > 1 && s[0] == '0') {
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

// Member is the value of a member key.
type Member struct {
	ID   string            `json:"id"`
	Addr string            `json:"addr"`
	Meta map[string]string `json:"meta,omitempty"`
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
// from the owner's clock); the claim's epoch is its CreateRevision.
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
