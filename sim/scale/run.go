package scale

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/sim/memetcd"
)

// Run measures cfg's fleet (see the package documentation), writes the
// figures to w as markdown and returns them. ctx bounds the run. It fails
// if the fleet does not stabilize after a change within cfg.WaitTimeout,
// or if two nodes ever served one partition at once; the Report then holds
// what was measured so far.
func Run(ctx context.Context, cfg Config, w io.Writer) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	start := time.Now()
	rep := &Report{Config: cfg}
	var err error
	if !cfg.SkipRing {
		logf(cfg, "ring-only figures at %d x %d", cfg.RingNodes, cfg.RingPartitions)
		rep.Ring, err = RingFigures(cfg)
		if err != nil {
			return rep, err
		}
	}
	if cfg.Placement {
		logf(cfg, "placement figures at %d x %d", cfg.Nodes, cfg.Partitions)
		rep.Placement, err = PlacementFigures(ctx, cfg)
		if err != nil {
			return rep, err
		}
	}
	if !cfg.RingOnly {
		rep.Live, err = runLive(ctx, cfg)
	}
	rep.Wall = time.Since(start)
	if w != nil {
		if werr := rep.WriteMarkdown(w); werr != nil && err == nil {
			err = werr
		}
	}
	return rep, err
}

// logf writes a progress line if cfg asks for them.
func logf(cfg Config, format string, args ...any) {
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05.000")}, args...)...)
	}
}

func runLive(ctx context.Context, cfg Config) (rep *LiveReport, err error) {
	f, err := newFleet(cfg)
	if err != nil {
		return nil, err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.WaitTimeout)
		defer cancel()
		if failed := f.close(cctx); failed > 0 {
			logf(cfg, "teardown: %d nodes did not close cleanly", failed)
		}
		if err == nil {
			err = f.overlapErr()
		}
	}()
	rep = &LiveReport{Nodes: cfg.Nodes, Partitions: cfg.Partitions}

	lease, err := f.park(ctx)
	if err != nil {
		return rep, err
	}
	rep.HeapBefore = heapInUse()
	goroutines := runtime.NumGoroutine()

	logf(cfg, "bring-up of %d nodes x %d partitions", cfg.Nodes, cfg.Partitions)
	rep.BringUp, err = f.phase(ctx, "bring-up", func(ph *Phase) error { return f.bringUp(ctx, ph, lease) })
	if err != nil {
		return rep, err
	}
	if err := f.compact(ctx); err != nil {
		return rep, err
	}
	rep.HeapFleet = heapInUse()
	if rep.HeapFleet > rep.HeapBefore {
		rep.HeapPerNode = (rep.HeapFleet - rep.HeapBefore) / uint64(cfg.Nodes)
	}
	rep.GoroutinesPerNode = float64(runtime.NumGoroutine()-goroutines) / float64(cfg.Nodes)
	logf(cfg, "fleet up in %v: heap %d MiB, %d KiB per node, %.1f goroutines per node",
		rep.BringUp.Wall.Round(time.Millisecond), rep.HeapFleet>>20, rep.HeapPerNode>>10, rep.GoroutinesPerNode)

	// The node that joins, and later the one that leaves and the one that
	// crashes: the IDs are arbitrary, the ring's hashing spreads them.
	joiner := f.add(fmt.Sprintf("node-%04d", cfg.Nodes))
	steps := []struct {
		name string
		run  func(ph *Phase) error
	}{
		{"join", func(ph *Phase) error {
			return f.change(ctx, ph, func() { f.startJoin(ctx, joiner) })
		}},
		{"leave", func(ph *Phase) error {
			m := f.members[f.ids[len(f.ids)/3]]
			return f.change(ctx, ph, func() { f.startClose(ctx, m) })
		}},
		{"crash", func(ph *Phase) error {
			m := f.members[f.ids[2*len(f.ids)/3]]
			return f.change(ctx, ph, func() { f.crash(m) })
		}},
		{"rolling restart", func(ph *Phase) error {
			live := f.liveIDs()
			for i, id := range live[:min(cfg.Restarts, len(live))] {
				m := f.members[id]
				if err := f.change(ctx, ph, func() { f.startClose(ctx, m) }); err != nil {
					return err
				}
				if err := f.change(ctx, ph, func() { f.startJoin(ctx, m) }); err != nil {
					return err
				}
				if (i+1)%max(1, cfg.Restarts/10) == 0 {
					logf(cfg, "restarted %d of %d", i+1, cfg.Restarts)
				}
			}
			return nil
		}},
	}
	if cfg.LoadReports > 0 {
		steps = append(steps, struct {
			name string
			run  func(ph *Phase) error
		}{"load reports", func(ph *Phase) error { return f.loadReports(ctx, ph, cfg.LoadReports) }})
	}
	for _, s := range steps {
		logf(cfg, "%s", s.name)
		ph, err := f.phase(ctx, s.name, s.run)
		rep.Phases = append(rep.Phases, ph)
		if err != nil {
			return rep, err
		}
		logf(cfg, "%s: stable after %v virtual, %v wall; %d writes, %d watch events",
			s.name, ph.Virtual, ph.Wall.Round(time.Millisecond), ph.Etcd.Writes, ph.Etcd.WatchEvents)
		if err := f.overlapErr(); err != nil {
			return rep, err
		}
		if s.name == "crash" {
			f.retireCrashed(ctx)
		}
		if err := f.compact(ctx); err != nil {
			return rep, err
		}
	}
	return rep, nil
}

// phase measures run as phase name.
func (f *fleet) phase(ctx context.Context, name string, run func(ph *Phase) error) (Phase, error) {
	ph := Phase{Name: name}
	st, acq, wall := f.nodeStats(), f.acquired.Load(), time.Now()
	err := run(&ph)
	ph.Etcd = f.nodeStats().Sub(st)
	ph.Acquired = f.acquired.Load() - acq
	ph.Wall = time.Since(wall)
	return ph, err
}

// change makes one membership change with act and waits for the stable
// ring, adding its figures to ph.
func (f *fleet) change(ctx context.Context, ph *Phase, act func()) error {
	before, err := f.expected()
	if err != nil {
		return err
	}
	act()
	after, err := f.expected()
	if err != nil {
		return err
	}
	diff, err := diffRings(before, after)
	if err != nil {
		return err
	}
	for _, c := range diff {
		ph.Moved += len(c.Gained)
	}
	if n := max(len(before.Members()), len(after.Members())); n > 0 {
		ph.Ideal += float64(f.cfg.Partitions) / float64(n)
	}
	s, err := f.settle(ctx)
	if err != nil {
		return fmt.Errorf("%s: %w", ph.Name, err)
	}
	ph.Changes++
	ph.Steps += s.steps
	ph.Virtual += s.virtual
	ph.MaxVirtual = max(ph.MaxVirtual, s.virtual)
	ph.MaxWall = max(ph.MaxWall, s.wall)
	return nil
}

// add adds a member that has not joined yet.
func (f *fleet) add(id string) *member {
	m := &member{id: id}
	f.members[id] = m
	f.ids = append(f.ids, id)
	return m
}

// park writes every claim key bound to a lease of the driver's, so that no
// node can claim before the driver revokes it.
func (f *fleet) park(ctx context.Context) (clientv3.LeaseID, error) {
	lay := keys.New(cluster)
	l, err := f.admin.Grant(ctx, int64((100 * 24 * time.Hour).Seconds()))
	if err != nil {
		return 0, fmt.Errorf("scale: park claims: %w", err)
	}
	batch := ownership.DefaultConfig().MaxTxnOps
	for lo := 0; lo < f.cfg.Partitions; lo += batch {
		var ops []clientv3.Op
		for p := lo; p < min(lo+batch, f.cfg.Partitions); p++ {
			ops = append(ops, clientv3.OpPut(lay.Claim(p), "parked", clientv3.WithLease(l.ID)))
		}
		if _, err := f.admin.Txn(ctx).Then(ops...).Commit(); err != nil {
			return 0, fmt.Errorf("scale: park claims: %w", err)
		}
	}
	return l.ID, nil
}

// bringUp joins every node with the claims parked, each cut off from etcd
// as soon as it has joined; then lets each catch up on the members in one
// watch response, and unparks the claims.
func (f *fleet) bringUp(ctx context.Context, ph *Phase, parked clientv3.LeaseID) error {
	type result struct {
		m   *member
		err error
	}
	work := make(chan *member)
	results := make(chan result)
	workers := 2 * runtime.GOMAXPROCS(0)
	for range workers {
		go func() {
			for m := range work {
				m.cli = f.srv.NewClient()
				n, err := ownership.Join(ctx, m.cli, f.nodeConfig(m.id))
				if err == nil {
					f.srv.Partition(m.cli.ID())
					m.node = n
				}
				results <- result{m, err}
			}
		}()
	}
	go func() {
		defer close(work)
		for _, id := range f.ids {
			select {
			case work <- f.members[id]:
			case <-ctx.Done():
				return
			}
		}
	}()
	var first error
	for i := range f.ids {
		r := <-results
		if r.err != nil && first == nil {
			first = fmt.Errorf("scale: join %s: %w", r.m.id, r.err)
		}
		r.m.live, r.m.gen = r.err == nil, 1
		if (i+1)%max(1, len(f.ids)/10) == 0 {
			logf(f.cfg, "joined %d of %d", i+1, len(f.ids))
		}
	}
	if first != nil {
		return first
	}
	cids := make([]memetcd.ClientID, 0, len(f.ids))
	for _, id := range f.ids {
		cids = append(cids, f.members[id].cli.ID())
	}
	f.srv.Reconnect(cids...)
	want, err := f.expected()
	if err != nil {
		return err
	}
	q := newQuiescence(f)
	for seen := 0; seen < len(f.ids); {
		if err := q.wait(ctx); err != nil {
			return err
		}
		seen = 0
		for _, id := range f.ids {
			if f.members[id].node.Ring().Version() == want.Version() {
				seen++
			}
		}
		logf(f.cfg, "%d of %d nodes see every member", seen, len(f.ids))
	}
	if _, err := f.admin.Revoke(ctx, parked); err != nil {
		return fmt.Errorf("scale: unpark claims: %w", err)
	}
	s, err := f.settle(ctx)
	if err != nil {
		return fmt.Errorf("bring-up: %w", err)
	}
	ph.Changes = len(f.ids)
	ph.Virtual, ph.MaxVirtual, ph.MaxWall, ph.Steps = s.virtual, s.virtual, s.wall, s.steps
	ph.Moved = f.cfg.Partitions
	return nil
}

// retireCrashed closes the crashed nodes, which otherwise keep trying to
// rejoin through their cut-off clients.
func (f *fleet) retireCrashed(ctx context.Context) {
	for _, id := range f.ids {
		m := f.members[id]
		if !m.crashed || m.node == nil {
			continue
		}
		ch := make(chan error, 1)
		n := m.node
		go func() { ch <- n.Close(ctx) }()
		for done := false; !done; {
			select {
			case <-ch:
				done = true
			case <-ctx.Done():
				return
			case <-time.After(f.cfg.Quiet):
				f.fc.Advance(f.cfg.Step)
			}
		}
		m.node = nil
		_ = m.cli.Close()
	}
}

// compact compacts memetcd's history at the current revision, as an
// operator's etcd would: memetcd otherwise keeps every revision.
func (f *fleet) compact(ctx context.Context) error {
	if _, err := f.admin.Compact(ctx, f.srv.Revision()); err != nil {
		return fmt.Errorf("scale: compact: %w", err)
	}
	return nil
}

// overlapErr returns an error wrapping ErrOverlap if two nodes ever served
// one partition at once.
func (f *fleet) overlapErr() error {
	if o := f.overlapList(); len(o) > 0 {
		return fmt.Errorf("%w: %d times, first: %s", ErrOverlap, len(o), o[0])
	}
	return nil
}

// heapInUse returns runtime.MemStats.HeapInuse after a full GC.
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapInuse
}
