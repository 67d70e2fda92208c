package memetcd

import (
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
)

// Stats counts the traffic of a Server, or of one of its Clients, since it
// was created. It is what a simulation reports as the etcd cost of a
// scenario.
type Stats struct {
	// Requests is the number of unary requests applied: every KV call, lease
	// call and keep-alive that reached the server (a request still waiting
	// out a partition is not counted).
	Requests int64
	// Reads are the requests a real etcd answers without a raft proposal:
	// Range, a Txn whose branches only read (etcd's isTxnReadonly),
	// TimeToLive and Leases.
	Reads int64
	// Writes are the requests a real etcd puts through raft: Put,
	// DeleteRange, a Txn with a write in either branch (whether or not its
	// executed branch changed anything), Compact, LeaseGrant and
	// LeaseRevoke.
	Writes int64
	// KeepAlives are lease renewals (KeepAliveOnce and every round of
	// KeepAlive).
	KeepAlives int64
	// Revisions is the number of revisions the requests committed. Lease
	// expiries commit revisions too; they count in the Server's Stats, not
	// a Client's.
	Revisions int64
	// WatchResponses is the number of watch responses carrying events that
	// the clients' watchers received.
	WatchResponses int64
	// WatchEvents is the number of events in those responses.
	WatchEvents int64
}

// Sub returns s minus o, field by field: the traffic between two readings.
func (s Stats) Sub(o Stats) Stats {
	return Stats{
		Requests:       s.Requests - o.Requests,
		Reads:          s.Reads - o.Reads,
		Writes:         s.Writes - o.Writes,
		KeepAlives:     s.KeepAlives - o.KeepAlives,
		Revisions:      s.Revisions - o.Revisions,
		WatchResponses: s.WatchResponses - o.WatchResponses,
		WatchEvents:    s.WatchEvents - o.WatchEvents,
	}
}

// Add returns s plus o, field by field.
func (s Stats) Add(o Stats) Stats {
	return Stats{
		Requests:       s.Requests + o.Requests,
		Reads:          s.Reads + o.Reads,
		Writes:         s.Writes + o.Writes,
		KeepAlives:     s.KeepAlives + o.KeepAlives,
		Revisions:      s.Revisions + o.Revisions,
		WatchResponses: s.WatchResponses + o.WatchResponses,
		WatchEvents:    s.WatchEvents + o.WatchEvents,
	}
}

// Stats returns the traffic of every client of s so far; its Revisions are
// all revisions committed, lease expiries included.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Revisions = s.st.rev - 1
	return st
}

// Stats returns the traffic of c so far.
func (c *Client) Stats() Stats {
	c.s.mu.Lock()
	defer c.s.mu.Unlock()
	return c.stats
}

// requestKind classifies a unary request for Stats.
type requestKind int

const (
	kindRead requestKind = iota
	kindWrite
	kindKeepAlive
)

// txnKind returns kindRead for a transaction that only reads, in both
// branches and every nested transaction (etcd's isTxnReadonly), else
// kindWrite.
func txnKind(r *pb.TxnRequest) requestKind {
	for _, ops := range [][]*pb.RequestOp{r.Success, r.Failure} {
		for _, op := range ops {
			switch o := op.Request.(type) {
			case *pb.RequestOp_RequestRange:
			case *pb.RequestOp_RequestTxn:
				if txnKind(o.RequestTxn) == kindWrite {
					return kindWrite
				}
			default:
				return kindWrite
			}
		}
	}
	return kindRead
}

// countLocked counts one applied request of c that committed revs
// revisions.
func (s *Server) countLocked(c *Client, kind requestKind, revs int64) {
	for _, st := range []*Stats{&s.stats, &c.stats} {
		st.Requests++
		switch kind {
		case kindRead:
			st.Reads++
		case kindWrite:
			st.Writes++
		case kindKeepAlive:
			st.KeepAlives++
		}
	}
	c.stats.Revisions += revs
}

// countWatchLocked counts a watch response that c's watcher receives.
func (s *Server) countWatchLocked(c *Client, r *pb.WatchResponse) {
	if len(r.Events) == 0 {
		return
	}
	for _, st := range []*Stats{&s.stats, &c.stats} {
		st.WatchResponses++
		st.WatchEvents += int64(len(r.Events))
	}
}
