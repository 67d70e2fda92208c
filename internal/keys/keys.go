// Package keys is the etcd key layout shared by tenure's packages:
//
//	<prefix>spec                 JSON fleet spec (partitions, load factor, ring algorithm)
//	<prefix>members/<nodeID>     JSON Member, lease = node Session
//	<prefix>claims/<partition>   nodeID, lease = owner's Session; epoch = CreateRevision
//	<prefix>leader/<name>/...    election keys
//	<prefix>fence/<scope>        highest epoch admitted, for stores in etcd
//
// The default prefix is "/tenure/<cluster>/".
package keys

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Layout builds and parses the keys of one cluster. The zero Layout is not
// useful; use New or ForPrefix.
type Layout struct {
	prefix, members, claims string
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
	return Layout{prefix: prefix, members: prefix + "members/", claims: prefix + "claims/"}
}

// For returns the layout of a configuration that names a cluster and may
// override its prefix: ForPrefix(prefix) if prefix is set, else New(cluster).
func For(cluster, prefix string) Layout {
	if prefix != "" {
		return ForPrefix(prefix)
	}
	return New(cluster)
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
