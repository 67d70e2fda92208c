package memetcd

import (
	"time"

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
