package election

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/tenure-go/tenure/internal/clock"
	"github.com/tenure-go/tenure/internal/leaderkey"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/internal/nilness"
)

// Election is one candidate's handle on a named leader election. Candidates
// put a key "<prefix>leader/<name>/<lease in hex>" bound to their session's
// lease; the candidate whose key has the lowest create revision leads, and
// that revision is its epoch. A candidate waits for the deletion of every
// key created before its own.
//
// An Election holds at most one candidacy at a time: one Campaign, or the
// Term it won, until that term has ended. Leader and Observe may be used
// concurrently with everything else. An Election is safe for concurrent use.
//
// Locking: Election.mu is the only lock of an Election and of its Terms. It
// guards the candidacy (campaigning, term) and is never held while calling
// etcd, a fencer, a hook or any other lock's owner.
type Election struct {
	session *Session
	kv      clientv3.KV
	w       clientv3.Watcher
	cfg     ElectionConfig // validated, defaults applied, copied
	scope   string
	prefix  string // ends in '/'
	key     string // own candidate key; empty without a session
	id      string // candidate ID
	value   string // encoded candidate record
	log     hclog.Logger
	met     *electionMetrics // nil: none

	closing       context.Context // cancelled by Close
	cancelClosing context.CancelFunc

	mu          sync.Mutex
	campaigning bool
	closed      bool
	term        *Term // the last term won, until it is released
	observed    Observation
	observedAt  time.Time
}

// NewElection returns a handle on the election cfg.Name, reached through kv
// and w (a *clientv3.Client satisfies both), for a candidate holding
// session. With a nil session the Election can only observe (Leader,
// Observe); Campaign and Run then return ErrNoSession.
//
// It returns an error wrapping ErrNilArgument for a nil kv or w,
// ErrInvalidConfig for an invalid cfg (its name included), nil or
// typed-nil fencers included, and ErrMetrics if cfg.Metrics is set and the
// election's metrics cannot be registered with it. cfg is validated first,
// then copied. Close ends the Election and unregisters its metrics.
func NewElection(session *Session, kv clientv3.KV, w clientv3.Watcher, cfg ElectionConfig) (*Election, error) {
	if nilness.Is(kv) {
		return nil, fmt.Errorf("%w: clientv3.KV %T", ErrNilArgument, kv)
	}
	if nilness.Is(w) {
		return nil, fmt.Errorf("%w: clientv3.Watcher %T", ErrNilArgument, w)
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	fallback := clock.Real()
	if session != nil {
		fallback = session.clock
	}
	cfg = cfg.withDefaults(fallback)
	layout := keys.For(cfg.Cluster, cfg.Prefix)
	e := &Election{
		session: session,
		kv:      kv,
		w:       w,
		cfg:     cfg,
		scope:   fence.LeaderScope(cfg.Name),
		prefix:  layout.Leader(cfg.Name),
		id:      cfg.ID,
	}
	e.closing, e.cancelClosing = context.WithCancel(context.Background())
	if session != nil {
		e.key = candidateKey(e.prefix, session.Lease())
		if e.id == "" {
			e.id = fmt.Sprintf("%x", int64(session.Lease()))
		}
		e.value = leaderkey.Encode(e.id, cfg.Value)
		e.log = cfg.Logger.With("election", cfg.Name, "candidate", e.id, "lease", fmt.Sprintf("%x", int64(session.Lease())))
	} else {
		e.log = cfg.Logger.With("election", cfg.Name, "candidate", e.id)
	}
	if cfg.Metrics != nil {
		met, err := newElectionMetrics(cfg.Metrics, e)
		if err != nil {
			e.cancelClosing()
			return nil, err
		}
		e.met = met
	}
	return e, nil
}

// Close ends this Election: a Campaign in progress returns an error
// wrapping ErrElectionClosed (and withdraws its candidacy), the term it
// holds, if any, is resigned (bounded by ctx), and its metrics are
// unregistered, so that an Election of the same name and ID can register
// them again. Later Campaign and Run calls return ErrElectionClosed; Leader,
// Observe and Status keep working (Observe streams end with their own
// contexts). Close returns the resign's error, if any. It is idempotent and
// safe to call concurrently with everything else; it does not close the
// session.
func (e *Election) Close(ctx context.Context) error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	t := e.term
	e.mu.Unlock()
	e.cancelClosing()
	var err error
	if t != nil {
		err = t.resign(ctx, fmt.Errorf("%w: %w", ErrResigned, ErrElectionClosed))
	}
	e.met.unregister()
	return err
}

// Prefix returns the etcd key prefix under which the candidates' keys live:
// a candidate's key is the prefix followed by its session's lease in
// hexadecimal.
func (e *Election) Prefix() string { return e.prefix }

// Leader returns the current leader, or an error wrapping ErrNoLeader if
// there is none. What it finds becomes Status's Observed.
func (e *Election) Leader(ctx context.Context) (Leader, error) {
	resp, err := e.kv.Get(ctx, e.prefix, clientv3.WithFirstCreate()...)
	if err != nil {
		return Leader{}, fmt.Errorf("election %q: leader: %w", e.cfg.Name, err)
	}
	if len(resp.Kvs) == 0 {
		e.observe1(Observation{Revision: resp.Header.Revision})
		return Leader{}, fmt.Errorf("election %q: %w", e.cfg.Name, ErrNoLeader)
	}
	l := leaderFromKV(resp.Kvs[0])
	e.observe1(Observation{Elected: true, Leader: l, Revision: resp.Header.Revision})
	return l, nil
}
