package memetcd

import (
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// CommitFunc is told of every revision a Server commits: the time on the
// server's clock and the revision's events (all with the same ModRevision).
type CommitFunc func(at time.Time, evs []*mvccpb.Event)

// OnCommit makes s call f with every revision it commits from now on, in
// revision order, under the server's lock: the order in which f sees
// revisions is the store's order of application, which a simulator's
// history needs (a write whose response was lost is seen too). f must be
// quick, must not modify the events and must not call s. A nil f removes
// the hook.
func (s *Server) OnCommit(f CommitFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onCommit = f
}

// TxnFunc is told of a transaction of client id that the server is about
// to apply: its request has passed the client's faults (partition,
// latency), so it will be applied. It runs on the caller's goroutine,
// without the server's lock, so it may call s (fault hooks, other
// clients) before the transaction is applied; the func it returns, if not
// nil, gets the transaction's result once applied, also without the lock
// (before the response is delayed or lost). f must not modify req.
type TxnFunc func(id ClientID, req *pb.TxnRequest) (applied func(resp *pb.TxnResponse, err error))

// OnTxn makes s call f with every transaction it applies from now on. A
// nil f removes the hook.
func (s *Server) OnTxn(f TxnFunc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onTxn = f
}
