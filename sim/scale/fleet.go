package scale

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/jonboulle/clockwork"

	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/memetcd"
)

// cluster is the name of the simulated cluster.
const cluster = "scale"

// fleet is the live fleet: one memetcd on a fake clock, the driver's own
// client, and the nodes. Only the driver goroutine calls its methods but
// the callbacks, which lock mu.
type fleet struct {
	cfg   Config
	ring  ring.Config
	fc    *clockwork.FakeClock
	srv   *memetcd.Server
	admin *memetcd.Client // the driver's client: its traffic is not the fleet's

	members map[string]*member
	ids     []string // every node ID, sorted

	mu       sync.Mutex
	serving  []string // by partition: the node serving it, as the callbacks tell
	overlaps []string

	acquired atomic.Int64 // OnAcquired calls
	released atomic.Int64 // OnReleased calls
}

// member is one node ID of the fleet and its current incarnation.
type member struct {
	id      string
	cli     *memetcd.Client
	node    *ownership.Node
	live    bool            // counted in the expected ring
	crashed bool            // cut off for good; must serve nothing
	seen    <-chan struct{} // the node's Changed when last polled
	closing chan error      // Close's result, while it runs
	joining chan joinResult // Join's result, while it runs
	gen     int             // incarnations so far
}

type joinResult struct {
	n   *ownership.Node
	err error
}

func newFleet(cfg Config) (*fleet, error) {
	fc := clockwork.NewFakeClock()
	srv, err := memetcd.New(memetcd.Config{Clock: fc})
	if err != nil {
		return nil, err
	}
	f := &fleet{
		cfg:     cfg,
		ring:    ring.Config{Partitions: cfg.Partitions, LoadFactor: cfg.LoadFactor, Algorithm: cfg.RingAlgorithm},
		fc:      fc,
		srv:     srv,
		admin:   srv.NewClient(),
		members: make(map[string]*member),
		serving: make([]string, cfg.Partitions),
	}
	for i := range cfg.Nodes {
		id := fmt.Sprintf("node-%04d", i)
		f.members[id] = &member{id: id}
		f.ids = append(f.ids, id)
	}
	return f, nil
}

// nodeConfig returns the ownership configuration of node id.
func (f *fleet) nodeConfig(id string) ownership.Config {
	cfg := ownership.DefaultConfig()
	cfg.Cluster = cluster
	cfg.NodeID = id
	cfg.Addr = id + ":7000"
	cfg.Ring = f.ring
	cfg.Session.TTL = f.cfg.TTL
	cfg.Clock = f.fc
	cfg.Callbacks = ownership.Callbacks{
		OnAcquired: func(e ownership.Event) {
			p := e.Partition
			f.acquired.Add(1)
			f.mu.Lock()
			defer f.mu.Unlock()
			if other := f.serving[p]; other != "" && other != id {
				f.overlaps = append(f.overlaps, fmt.Sprintf("partition %d: %s acquired it while %s served it", p, id, other))
			}
			f.serving[p] = id
		},
		OnReleased: func(e ownership.Event) {
			p := e.Partition
			f.released.Add(1)
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.serving[p] == id {
				f.serving[p] = ""
			}
		},
	}
	return cfg
}

// startJoin starts joining m with a new client, on a goroutine: Join needs
// no virtual time, but the driver keeps the clock going meanwhile all the
// same.
func (f *fleet) startJoin(ctx context.Context, m *member) {
	m.cli = f.srv.NewClient()
	m.gen++
	m.live, m.crashed = true, false
	ch := make(chan joinResult, 1)
	m.joining = ch
	cli, cfg := m.cli, f.nodeConfig(m.id)
	go func() {
		n, err := ownership.Join(ctx, cli, cfg)
		ch <- joinResult{n, err}
	}()
}

// startClose starts closing m's node gracefully, on a goroutine: the
// handoff may wait on the virtual clock.
func (f *fleet) startClose(ctx context.Context, m *member) {
	m.live = false
	ch := make(chan error, 1)
	m.closing = ch
	n := m.node
	go func() { ch <- n.Close(ctx) }()
}

// crash cuts m's client off the server for good: its session expires on
// virtual time, and with it its member key and claims.
func (f *fleet) crash(m *member) {
	m.live, m.crashed = false, true
	f.srv.Partition(m.cli.ID())
}

// pending reports whether a join or close started by the driver is still
// running, and fails if one failed.
func (f *fleet) pending() (bool, error) {
	busy := false
	for _, id := range f.ids {
		m := f.members[id]
		if m.joining != nil {
			select {
			case r := <-m.joining:
				m.joining = nil
				if r.err != nil {
					return false, fmt.Errorf("scale: join %s: %w", m.id, r.err)
				}
				m.node = r.n
			default:
				busy = true
			}
		}
		if m.closing != nil {
			select {
			case err := <-m.closing:
				m.closing = nil
				if err != nil {
					return false, fmt.Errorf("scale: close %s: %w", m.id, err)
				}
				m.node = nil
				_ = m.cli.Close()
			default:
				busy = true
			}
		}
	}
	return busy, nil
}

// liveIDs returns the sorted IDs of the live members.
func (f *fleet) liveIDs() []string {
	var ids []string
	for _, id := range f.ids {
		if f.members[id].live {
			ids = append(ids, id)
		}
	}
	return ids
}

// expected returns the ring of the live members.
func (f *fleet) expected() (*ring.Ring, error) {
	return ring.New(f.liveIDs(), f.ring)
}

// nodeStats returns the fleet's etcd traffic so far: the server's, minus
// the driver's own.
func (f *fleet) nodeStats() memetcd.Stats {
	return f.srv.Stats().Sub(f.admin.Stats())
}

// overlapList returns the overlaps recorded so far.
func (f *fleet) overlapList() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.overlaps)
}

// close closes every node (crashed ones too) and the server. Nodes close
// concurrently; the driver advances the virtual clock only when the fleet
// is quiescent, as in settle, so that no session misses a renewal. It
// returns how many nodes failed to close cleanly (teardown is not
// measured).
func (f *fleet) close(ctx context.Context) int {
	defer f.srv.Close()
	for _, id := range f.ids {
		m := f.members[id]
		if m.joining != nil {
			if r := <-m.joining; r.err == nil {
				m.node = r.n
			}
			m.joining = nil
		}
		if m.closing != nil {
			<-m.closing
			m.closing, m.node = nil, nil
		}
		if m.node != nil {
			m.live = false
			ch, n := make(chan error, 1), m.node
			m.closing = ch
			go func() { ch <- n.Close(ctx) }()
		}
	}
	failed := 0
	q := newQuiescence(f)
	for {
		busy := false
		for _, id := range f.ids {
			m := f.members[id]
			if m.closing == nil {
				continue
			}
			select {
			case err := <-m.closing:
				if err != nil && !m.crashed {
					failed++
				}
				m.closing, m.node = nil, nil
			default:
				busy = true
			}
		}
		if !busy || q.wait(ctx) != nil {
			return failed
		}
		f.fc.Advance(f.cfg.Step)
	}
}
