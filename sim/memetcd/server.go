package memetcd

import (
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"

	"github.com/tenure-go/tenure/internal/clock"
)

const (
	// DefaultMaxTxnOps is etcd's default --max-txn-ops.
	DefaultMaxTxnOps = 128
	// DefaultMinLeaseTTL is etcd's minimum lease TTL with its default timing
	// (heartbeat 100ms, election timeout 1s: 1.5 election timeouts, rounded
	// up to whole seconds).
	DefaultMinLeaseTTL = 2 * time.Second
	// DefaultElectionTimeout is etcd's default election timeout, by which a
	// new leader extends every lease.
	DefaultElectionTimeout = time.Second
	// maxLeaseTTL is etcd's MaxLeaseTTL in seconds.
	maxLeaseTTL = 9000000000
	// watchBatchMaxRevs is how many revisions etcd puts in one catch-up
	// watch response.
	watchBatchMaxRevs = 1000

	clusterID = 0x6d656d65746364 // "memetcd"
	memberID  = 0x1
)

// Config configures a Server. The zero value of each field selects its
// documented default.
type Config struct {
	// Clock is the time on which leases expire and faults delay. Nil means
	// the system clock; a *clockwork.FakeClock gives virtual time. The
	// Server keeps one timer on it (for the next lease expiry), which
	// counts among the fake clock's waiters.
	Clock clockwork.Clock
	// MaxTxnOps is the server's --max-txn-ops. Zero means 128.
	MaxTxnOps int
	// MinLeaseTTL is the shortest TTL a lease is granted; shorter requests
	// get it. It is rounded up to whole seconds. Zero means 2s, etcd's
	// minimum with its default timing.
	MinLeaseTTL time.Duration
	// ElectionTimeout is how long a new leader adds to every lease's TTL
	// (LeaderChange), as etcd's lessor Promote does. Zero means 1s.
	ElectionTimeout time.Duration
}

// DefaultConfig returns the defaults: the system clock, 128 ops per
// transaction, a 2s minimum lease TTL and a 1s election timeout.
func DefaultConfig() Config { return Config{}.withDefaults() }

func (c Config) withDefaults() Config {
	if c.Clock == nil {
		c.Clock = clock.Real()
	}
	if c.MaxTxnOps == 0 {
		c.MaxTxnOps = DefaultMaxTxnOps
	}
	if c.MinLeaseTTL == 0 {
		c.MinLeaseTTL = DefaultMinLeaseTTL
	}
	if c.ElectionTimeout == 0 {
		c.ElectionTimeout = DefaultElectionTimeout
	}
	return c
}

// Validate reports whether c can configure a Server. Errors wrap
// ErrInvalidConfig.
func (c Config) Validate() error {
	switch {
	case c.MaxTxnOps < 0:
		return fmt.Errorf("%w: max txn ops %d must not be negative", ErrInvalidConfig, c.MaxTxnOps)
	case c.MinLeaseTTL < 0:
		return fmt.Errorf("%w: min lease TTL %v must not be negative", ErrInvalidConfig, c.MinLeaseTTL)
	case c.ElectionTimeout < 0:
		return fmt.Errorf("%w: election timeout %v must not be negative", ErrInvalidConfig, c.ElectionTimeout)
	}
	return nil
}

// Server is an in-memory etcd: one keyspace, one lessor, its watchers and
// the fault state of its clients. It is safe for concurrent use.
type Server struct {
	cfg    Config
	clock  clockwork.Clock
	minTTL int64 // seconds

	mu         sync.Mutex
	st         *store
	leases     map[int64]*lease
	leaseSeq   int64
	term       uint64
	leaderless bool
	timer      clockwork.Timer
	timerAt    time.Time
	clients    []*Client
	streams    []*watchStream
	changed    chan struct{} // closed and replaced when fault state changes
	closed     bool
	onCommit   CommitFunc
	onTxn      TxnFunc
	stats      Stats
}

// lease is one granted lease.
type lease struct {
	id     int64
	ttl    int64 // granted, seconds
	expiry time.Time
	keys   map[string]struct{}
}

// New returns a Server at revision 1 with no keys and no leases.
func New(cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	return &Server{
		cfg:     cfg,
		clock:   cfg.Clock,
		minTTL:  int64(math.Ceil(cfg.MinLeaseTTL.Seconds())),
		st:      newStore(),
		leases:  make(map[int64]*lease),
		term:    2,
		changed: make(chan struct{}),
	}, nil
}

// Clock returns the server's clock.
func (s *Server) Clock() clockwork.Clock { return s.clock }

// Revision returns the current revision.
func (s *Server) Revision() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked()
	return s.st.rev
}

// CompactRevision returns the revision of the last compaction, or -1.
func (s *Server) CompactRevision() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.compactRev
}

// Close closes every client and stops the server's timer. Calls on its
// clients fail from then on.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	clients := slices.Clone(s.clients)
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	s.mu.Unlock()
	for _, c := range clients {
		_ = c.Close()
	}
}

// header returns a response header at rev.
func (s *Server) header(rev int64) *pb.ResponseHeader {
	return &pb.ResponseHeader{ClusterId: clusterID, MemberId: memberID, Revision: rev, RaftTerm: s.term}
}

// fill completes a header as etcd's v3rpc does.
func (s *Server) fill(h *pb.ResponseHeader) {
	h.ClusterId, h.MemberId, h.RaftTerm = clusterID, memberID, s.term
	if h.Revision == 0 {
		h.Revision = s.st.rev
	}
}

// commitLocked ends the write in progress and notifies the watchers.
func (s *Server) commitLocked() {
	if evs := s.st.commit(); evs != nil {
		if s.onCommit != nil {
			s.onCommit(s.clock.Now(), evs)
		}
		s.notifyLocked(evs)
	}
}

// signalLocked wakes everything that waits on fault state.
func (s *Server) signalLocked() {
	close(s.changed)
	s.changed = make(chan struct{})
}

// --- leases ---

func (s *Server) attach(id int64, key string) {
	if l := s.leases[id]; l != nil {
		l.keys[key] = struct{}{}
	}
}

func (s *Server) detach(id int64, key string) {
	if l := s.leases[id]; l != nil {
		delete(l.keys, key)
	}
}

func (s *Server) grantLocked(ttl int64) (*pb.LeaseGrantResponse, error) {
	if ttl > maxLeaseTTL {
		return nil, rpcLeaseTTLTooLarge
	}
	s.leaseSeq++
	id := int64(0x694d)<<48 | s.leaseSeq
	if ttl < s.minTTL {
		ttl = s.minTTL
	}
	l := &lease{id: id, ttl: ttl, keys: make(map[string]struct{})}
	s.refresh(l, 0)
	s.leases[id] = l
	s.scheduleLocked()
	return &pb.LeaseGrantResponse{Header: &pb.ResponseHeader{}, ID: id, TTL: ttl}, nil
}

// refresh restarts l's countdown from now, plus extend.
func (s *Server) refresh(l *lease, extend time.Duration) {
	l.expiry = s.clock.Now().Add(extend + time.Duration(l.ttl)*time.Second)
}

// revokeLocked deletes l's keys in one revision (none if it has none) and
// forgets it.
func (s *Server) revokeLocked(l *lease) {
	keys := make([]string, 0, len(l.keys))
	for k := range l.keys {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		if s.st.latest(k) != nil {
			s.st.del(k)
		}
	}
	delete(s.leases, l.id)
	s.commitLocked()
}

// expireLocked revokes every lease whose countdown has run out, earliest
// first, one revision each. Nothing expires without a leader.
func (s *Server) expireLocked() {
	if s.leaderless {
		return
	}
	now := s.clock.Now()
	var due []*lease
	for _, l := range s.leases {
		if !now.Before(l.expiry) {
			due = append(due, l)
		}
	}
	if len(due) == 0 {
		return
	}
	slices.SortFunc(due, func(a, b *lease) int {
		if c := a.expiry.Compare(b.expiry); c != 0 {
			return c
		}
		return cmpInt(a.id, b.id)
	})
	for _, l := range due {
		s.revokeLocked(l)
	}
	s.scheduleLocked()
}

// scheduleLocked sets the server's timer to the next lease expiry.
func (s *Server) scheduleLocked() {
	if s.closed {
		return
	}
	var next time.Time
	if !s.leaderless {
		for _, l := range s.leases {
			if next.IsZero() || l.expiry.Before(next) {
				next = l.expiry
			}
		}
	}
	if s.timer != nil && next.Equal(s.timerAt) {
		return
	}
	if s.timer != nil {
		s.timer.Stop()
		s.timer = nil
	}
	s.timerAt = next
	if next.IsZero() {
		return
	}
	s.timer = s.clock.AfterFunc(next.Sub(s.clock.Now()), func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.timer = nil
		s.timerAt = time.Time{}
		s.expireLocked()
		s.scheduleLocked()
	})
}

func (s *Server) sortedLeases() []*lease {
	ls := make([]*lease, 0, len(s.leases))
	for _, l := range s.leases {
		ls = append(ls, l)
	}
	slices.SortFunc(ls, func(a, b *lease) int {
		if c := a.expiry.Compare(b.expiry); c != 0 {
			return c
		}
		return cmpInt(a.id, b.id)
	})
	return ls
}

// --- server-wide faults ---

// LeaderChange simulates the election of a new etcd leader: the raft term
// grows, and every live lease's countdown restarts from now with the
// election timeout added (etcd's lessor Promote): a lease that was about to
// expire lives a full TTL longer. If the server was leaderless
// (LoseLeader), requests flow again.
func (s *Server) LeaderChange() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked()
	s.term++
	s.leaderless = false
	for _, l := range s.sortedLeases() {
		s.refresh(l, s.cfg.ElectionTimeout)
	}
	s.scheduleLocked()
	s.signalLocked()
}

// LoseLeader simulates an etcd cluster without a leader until the next
// LeaderChange: requests of every client wait (until their context ends)
// unless their context carries clientv3.WithRequireLeader, in which case
// they fail at once with etcd's "no leader" error; no lease expires; and
// watches opened with WithRequireLeader are cancelled with that error;
// other watches stay open and quiet.
func (s *Server) LoseLeader() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.expireLocked()
	s.leaderless = true
	for _, ws := range slices.Clone(s.streams) {
		if ws.requireLeader {
			ws.failLocked(rpcNoLeader)
		}
	}
	s.scheduleLocked()
	s.signalLocked()
}

// notifyLocked queues the events of one revision to every watcher that
// matches them.
func (s *Server) notifyLocked(evs []*mvccpb.Event) {
	for _, ws := range s.streams {
		ws.notifyLocked(evs)
	}
}
