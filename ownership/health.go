package ownership

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/tenure-go/tenure/election"
)

// NodeStatus is a snapshot of one Node's health, for health checks,
// dashboards and debugging endpoints. It holds no credential.
type NodeStatus struct {
	// ID is the node's ID.
	ID string `json:"id"`
	// Live reports whether the node has a valid session: it is not closed
	// and its current session has not ended. It is false between the loss
	// of a session and the next one's start.
	Live bool `json:"live"`
	// Ready reports whether the node is live and serves every partition
	// the ring gives it: false while it acquires partitions (after Join, a
	// loss or a ring change; until it admits work for them, once their
	// OnAcquired has returned) and while a move to it is in progress. A
	// drained node, to which the ring gives nothing, is ready as long as
	// it is live.
	Ready bool `json:"ready"`
	// Closed reports that the node has stopped (Close, or its etcd client
	// closed under it).
	Closed bool `json:"closed"`
	// Drained reports that an operator drained this node, as it last saw.
	Drained bool `json:"drained"`
	// Lease is the current session's lease ID in hexadecimal, as the logs
	// show it.
	Lease string `json:"lease,omitempty"`
	// SessionEnd is why the current session ended, as its loss was counted
	// (election.LossCause: expired, revoked, deleted or closed); empty
	// while it lives.
	SessionEnd string `json:"session_end,omitempty"`
	// Session is the current session's renewal statistics: renewals,
	// failures, last renewal latency, and Remaining, the margin left before
	// its safe deadline.
	Session election.SessionStatus `json:"session"`
	// RingVersion is the Version of the ring the node routes by.
	RingVersion uint64 `json:"ring_version"`
	// Revision is the etcd revision the node's view of the fleet is at:
	// the view holds every change of the fleet's members, drain marks,
	// claims, placements and spec up to it and none after it, except the
	// node's own claims, which it knows from its transactions before its
	// watches bring them.
	Revision int64 `json:"revision"`
	// Members counts the registered members, drained ones included.
	Members int `json:"members"`
	// Assigned counts the partitions the ring gives this node.
	Assigned int `json:"assigned"`
	// Partitions lists the partitions this node serves (admits work
	// for), ascending.
	Partitions []ServedPartition `json:"partitions"`
	// Rewound lists, by partition, the partitions this node claimed but
	// does not serve because etcd's revisions went backwards (etcd
	// restored from a snapshot without --bump-revision): a store's floor
	// is above the claim's epoch and above etcd's revision. Empty
	// otherwise.
	Rewound []RewindError `json:"rewound,omitempty"`
}

// ServedPartition is one partition a node serves.
type ServedPartition struct {
	// Partition is the partition's number.
	Partition int `json:"partition"`
	// Epoch is the tenure's epoch (its fencing token's).
	Epoch int64 `json:"epoch"`
	// Since is when the node created its claim, by its clock; zero if
	// unknown.
	Since time.Time `json:"since"`
}

// Status returns a snapshot of the node's health. It takes no lock of the
// event loop and is safe to call from any goroutine, a callback included.
func (n *Node) Status() NodeStatus {
	s := n.snap.Load()
	st := NodeStatus{
		ID:          n.id,
		Closed:      s.closed,
		RingVersion: s.ring.Version(),
		Revision:    s.rev,
		Members:     len(s.members),
		Partitions:  make([]ServedPartition, 0, len(s.owned)),
	}
	st.Drained = n.report.drained.Load()
	st.Rewound = n.report.rewoundNow()
	sess := s.gen.sess
	st.Lease = fmt.Sprintf("%x", int64(sess.Lease()))
	st.Session = sess.Status()
	st.SessionEnd = election.LossCause(sess.Err())
	for _, p := range s.owned {
		r := s.routes[p].route
		st.Partitions = append(st.Partitions, ServedPartition{Partition: p, Epoch: r.Epoch, Since: r.Since})
	}
	st.Live = n.live(s)
	st.Assigned, st.Ready = n.assigned(s)
	st.Ready = st.Ready && st.Live
	return st
}

func (n *Node) live(s *snapshot) bool {
	return !s.closed && s.gen.sess.Err() == nil
}

// assigned returns the number of partitions the ring of s gives this node,
// and whether it serves them all.
func (n *Node) assigned(s *snapshot) (count int, all bool) {
	all = !s.closed
	for p := range s.routes {
		if e := &s.routes[p]; e.next == n.id {
			count++
			all = all && e.route.Local
		}
	}
	return count, all
}

// HealthHandler returns an http.Handler that answers the node's health
// probes in the style of Kubernetes' /livez and /readyz: a request whose
// path ends in "/livez" is answered from NodeStatus.Live, one ending in
// "/readyz" from NodeStatus.Ready, with 200 and a JSON body
// {"check":"readyz","ok":true,...} when the check passes and 503 when it
// fails; any other path gets 404. Mount it at the prefix you like
// (mux.Handle("/healthz/", n.HealthHandler())). The body carries the node
// ID, the ring version and the counts of partitions assigned and served;
// add "?verbose=1" to get the whole NodeStatus. It is safe for concurrent
// use.
func (n *Node) HealthHandler() http.Handler { return healthHandler{n} }

// healthHandler is the Node's HealthHandler.
type healthHandler struct{ n *Node }

// healthAnswer is the body of a health probe's answer.
type healthAnswer struct {
	Check       string      `json:"check"`
	OK          bool        `json:"ok"`
	Node        string      `json:"node"`
	Reason      string      `json:"reason,omitempty"`
	RingVersion uint64      `json:"ring_version"`
	Assigned    int         `json:"assigned"`
	Served      int         `json:"served"`
	Status      *NodeStatus `json:"status,omitempty"`
}

// ServeHTTP answers a /livez or /readyz probe.
func (h healthHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var check string
	switch {
	case strings.HasSuffix(r.URL.Path, "/livez"):
		check = "livez"
	case strings.HasSuffix(r.URL.Path, "/readyz"):
		check = "readyz"
	default:
		http.NotFound(w, r)
		return
	}
	st := h.n.Status()
	a := healthAnswer{Check: check, Node: st.ID, RingVersion: st.RingVersion, Assigned: st.Assigned, Served: len(st.Partitions)}
	switch {
	case st.Closed:
		a.Reason = "node closed"
	case !st.Live && st.SessionEnd != "":
		a.Reason = "no live session: lost (" + st.SessionEnd + ")"
	case !st.Live:
		a.Reason = "no live session"
	case check == "readyz" && !st.Ready && len(st.Rewound) > 0:
		a.Reason = fmt.Sprintf("etcd revisions went backwards (restored from a snapshot?): %d partitions wait for etcd's revision to pass their stores' floors", len(st.Rewound))
	case check == "readyz" && !st.Ready:
		a.Reason = fmt.Sprintf("serves %d of the %d partitions the ring gives it", len(st.Partitions), st.Assigned)
	default:
		a.OK = true
	}
	if r.URL.Query().Get("verbose") != "" {
		a.Status = &st
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	if !a.OK {
		w.WriteHeader(http.StatusServiceUnavailable)
	}
	_ = json.NewEncoder(w).Encode(a)
}
