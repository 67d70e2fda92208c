package keys

import (
	"strconv"
	"strings"
)

// The readiness keys of warm handoffs:
//
//	<prefix>ready/<partition>/<nodeID>   the epoch of the claim that nodeID
//	                                     prepared to take over, lease =
//	                                     nodeID's Session
//
// A node that the ring makes the next owner of a partition another node
// holds prepares it and then puts this key; the holder, which watches the
// prefix, hands the partition off once the key of its successor names its
// own claim's epoch.

// ReadyPrefix returns the prefix of all readiness keys.
func (l Layout) ReadyPrefix() string { return l.prefix + "ready/" }

// Ready returns the readiness key of node id for partition p.
func (l Layout) Ready(p int, id string) string {
	return l.ReadyPrefix() + strconv.Itoa(p) + "/" + id
}

// ReadyKey returns the partition and node ID of a readiness key.
func (l Layout) ReadyKey(key string) (p int, id string, ok bool) {
	s, ok := strings.CutPrefix(key, l.ReadyPrefix())
	if !ok {
		return 0, "", false
	}
	ps, id, ok := strings.Cut(s, "/")
	if !ok || id == "" || ps == "" || (len(ps) > 1 && ps[0] == '0') {
		return 0, "", false
	}
	p, err := strconv.Atoi(ps)
	if err != nil || p < 0 {
		return 0, "", false
	}
	return p, id, true
}
