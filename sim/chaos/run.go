//go:build unix

package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/tenure-go/tenure/internal/childproc"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/chaos/internal/wire"
	"github.com/tenure-go/tenure/sim/check"
	"github.com/tenure-go/tenure/sim/cluster"
)

// clusterName is the fleet's cluster in etcd.
const clusterName = "chaos"

// Run runs one chaos run (see the package documentation), writes its
// report as markdown to out (nil: nowhere) and returns it. The error wraps
// ErrViolation when a check failed (the Report is returned too), or says
// why the run could not be made.
func Run(ctx context.Context, cfg Config, out io.Writer) (*Report, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	progress := cfg.Progress
	if progress == nil {
		progress = io.Discard
	}
	start := time.Now()

	// Build the worker while etcd starts.
	bin := cfg.WorkerBinary
	built := make(chan error, 1)
	if bin == "" {
		dir, err := os.MkdirTemp("", "tenure-chaos-")
		if err != nil {
			return nil, fmt.Errorf("chaos: temp dir: %w", err)
		}
		defer os.RemoveAll(dir)
		go func() {
			var err error
			bin, err = buildWorker(ctx, dir)
			built <- err
		}()
	} else {
		built <- nil
	}
	ccfg := cluster.DefaultConfig()
	ccfg.Members, ccfg.Processes = 3, true
	if cfg.WorkerLogs != nil {
		// etcd's warnings (lease revocations, leadership checks) too.
		ccfg.Logger = zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(cfg.WorkerLogs), zap.WarnLevel))
	}
	c, err := cluster.Start(ctx, ccfg)
	if berr := <-built; berr != nil {
		if err == nil {
			_ = c.Close()
		}
		return nil, berr
	}
	if err != nil {
		return nil, err
	}
	defer c.Close()
	cli, err := c.Client()
	if err != nil {
		return nil, err
	}
	resp, err := cli.Get(ctx, "/")
	if err != nil {
		return nil, fmt.Errorf("chaos: first read: %w", err)
	}
	rev0 := resp.Header.Revision
	fmt.Fprintf(progress, "chaos: etcd (3 member processes) up and worker built in %v\n", time.Since(start).Round(time.Millisecond))

	rec := &check.Recorder{}
	f := &fleet{cfg: cfg, bin: bin, cluster: clusterName, start: start, rec: rec,
		writes: make(map[string]check.WriteID), reasons: make(map[tenureID]string), stopped: make(map[string]string), latest: make(map[int]int64), unknownErrs: make(map[string]int)}
	defer f.close(0)
	for i := range cfg.Workers {
		fp, err := c.NewFaultPoint()
		if err != nil {
			return nil, err
		}
		f.workers = append(f.workers, &worker{name: "w" + strconv.Itoa(i+1), fp: fp, logs: &childproc.Tail{W: cfg.WorkerLogs, Size: workerLogTail}, stopping: make(chan string, 1)})
	}
	jctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for _, w := range f.workers {
		if err := f.startWorker(w); err != nil {
			return nil, err
		}
	}
	for _, w := range f.workers {
		if err := f.waitJoined(jctx, w); err != nil {
			return nil, err
		}
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	defer transport.CloseIdleConnections()
	client, err := router.NewClient(jctx, cli, router.ClientConfig{
		Cluster: clusterName,
		// One attempt at a paused worker must not hold the request: the
		// client tries again, at the owner it then sees.
		HTTPClient: &http.Client{Timeout: attemptTimeout, Transport: stamp{transport}},
		Backoff:    router.Backoff{MaxAttempts: 1000, Initial: 10 * time.Millisecond, Max: 200 * time.Millisecond},
	})
	if err != nil {
		return nil, err
	}
	defer client.Close()
	fmt.Fprintf(progress, "chaos: %d workers joined in %v; load and faults for %v\n", cfg.Workers, time.Since(start).Round(time.Millisecond), cfg.Duration)

	l := &load{cfg: cfg, client: client, rec: rec, start: start, opTimeout: 5*cfg.TTL + 5*time.Second, errs: make(map[string]int)}
	loadStart := time.Now()
	lctx, stopLoad := context.WithTimeout(ctx, cfg.Duration)
	defer stopLoad()
	var wg sync.WaitGroup
	wg.Go(func() { l.run(lctx) })
	plan := schedule(cfg)
	var faults []faultRecord
	wg.Go(func() { faults = inject(lctx, c, f, plan, loadStart, progress) })
	pctx, stopProgress := context.WithCancel(ctx)
	var pwg sync.WaitGroup
	pwg.Go(func() { reportProgress(pctx, progress, f, l, loadStart, len(plan), func() int { return injected(f) }) })
	wg.Wait()
	stopProgress()
	pwg.Wait()
	loadWall := time.Since(loadStart)

	// Settle: every worker back, then read every counter through the
	// fleet once more.
	sctx, cancel := context.WithTimeout(ctx, 6*cfg.TTL+20*time.Second)
	defer cancel()
	for _, w := range f.workers {
		if err := f.waitJoined(sctx, w); err != nil {
			fmt.Fprintf(progress, "chaos: %v\n", err)
		}
	}
	for k := range cfg.Keys {
		l.count("final", keyName(k))
	}
	// Leave gracefully: the last handoffs.
	f.close(10 * time.Second)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}

	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	storeLog, err := readStoreLog(rctx, cli, rev0)
	if err != nil {
		return nil, err
	}
	finals, err := readFinals(rctx, cli)
	if err != nil {
		return nil, err
	}
	anomalies, unknownApplied := recordStore(f, storeLog, finals)
	h := rec.History()
	fmt.Fprintf(progress, "chaos: checking %d writes and %d operations\n", len(h.Writes), len(h.Ops))
	cr, err := check.All(h, check.Config{Linear: check.LinearConfig{Timeout: time.Minute}})
	if err != nil {
		return nil, err
	}
	r := newReport(cfg, f, l, h, cr, faults, anomalies, unknownApplied)
	r.LoadWall, r.Wall = loadWall, time.Since(start)
	r.ClientStats = client.Stats()
	if out != nil {
		if err := r.WriteMarkdown(out); err != nil {
			return r, err
		}
	}
	if !r.OK() {
		return r, fmt.Errorf("%w: %d violations", ErrViolation, len(r.Violations))
	}
	return r, nil
}

// attemptTimeout bounds one attempt of a client request.
const attemptTimeout = time.Second

// stamp sets wire.AttemptDeadline on every attempt.
type stamp struct{ next http.RoundTripper }

func (s stamp) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set(wire.AttemptDeadline, strconv.FormatInt(time.Now().Add(attemptTimeout).UnixNano(), 10))
	return s.next.RoundTrip(req)
}

// inject runs the plan, one fault at a time, until it is done or ctx
// ends; a fault under way when ctx ends is held and healed as planned.
func inject(ctx context.Context, c *cluster.Cluster, f *fleet, plan []fault, loadStart time.Time, progress io.Writer) []faultRecord {
	var out []faultRecord
	for _, p := range plan {
		t := time.NewTimer(time.Until(loadStart.Add(p.At)))
		select {
		case <-ctx.Done():
			t.Stop()
			return out
		case <-t.C:
		}
		r := faultRecord{fault: p}
		r.Start = f.now()
		r.Err = apply(ctx, c, f, &r)
		r.Healed = f.now()
		fmt.Fprintf(progress, "chaos: fault %s\n", r)
		out = append(out, r)
		f.mu.Lock()
		f.faults = append(f.faults, r)
		f.mu.Unlock()
	}
	return out
}

// apply injects one fault, holds it and heals it.
func apply(ctx context.Context, c *cluster.Cluster, f *fleet, r *faultRecord) error {
	hold := func() { time.Sleep(r.Hold) }
	switch r.Kind {
	case LeaderKill, LeaderFreeze:
		fail := c.KillLeader
		if r.Kind == LeaderFreeze {
			fail = c.FreezeLeader
		}
		i, err := fail(context.WithoutCancel(ctx))
		if err != nil {
			return err
		}
		r.Target = "m" + strconv.Itoa(i)
		r.Start = f.now()
		hold()
		if r.Kind == LeaderFreeze {
			return c.ThawMember(i)
		}
		return c.RestartMember(context.WithoutCancel(ctx), i)
	}
	w := f.pick(r.Worker)
	if w == nil {
		return errors.New("no worker up")
	}
	r.Target = w.name
	r.Start = f.now()
	switch r.Kind {
	case Pause:
		f.mu.Lock()
		p := w.proc
		f.mu.Unlock()
		// Arm the worker to stop itself between the read and the write of
		// its next increment; if none comes within the second it is
		// armed, stop it wherever it is.
		if err := p.Signal(syscall.SIGUSR1); err != nil {
			return err
		}
		select {
		case at := <-w.stopping:
			r.Detail = "between read and write of " + at
		case <-time.After(1200 * time.Millisecond):
			r.Detail = "idle"
		}
		r.Start = f.now()
		if err := p.stop(); err != nil {
			return err
		}
		held := f.heldBy(w)
		hold()
		// Resume only once others hold all its partitions, however slow
		// the failover: the paused write must meet a newer epoch.
		for deadline := time.Now().Add(4 * f.cfg.TTL); !f.taken(held) && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
		}
		return p.cont()
	case Kill:
		f.killWorker(w)
		hold()
		return f.startWorker(w)
	case Blackhole:
		w.fp.Blackhole()
		hold()
		w.fp.Heal()
		return nil
	}
	return fmt.Errorf("unknown fault kind %v", r.Kind)
}

// pick returns worker i if it is up, else the next one that is.
func (f *fleet) pick(i int) *worker {
	f.mu.Lock()
	defer f.mu.Unlock()
	for j := range f.workers {
		w := f.workers[(i+j)%len(f.workers)]
		if w.joined && w.proc != nil {
			return w
		}
	}
	return nil
}

func injected(f *fleet) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.faults)
}

// reportProgress writes a line every few seconds until ctx ends.
func reportProgress(ctx context.Context, w io.Writer, f *fleet, l *load, start time.Time, planned int, done func() int) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		f.mu.Lock()
		n := f.counts
		f.mu.Unlock()
		fmt.Fprintf(w, "chaos: %4.0fs  increments %d (acked %d, unknown %d)  reads %d  writes %d (stale refused %d)  faults %d/%d  workers up %d/%d\n",
			time.Since(start).Seconds(), l.incrs.Load(), l.acked.Load(), l.unknown.Load(), l.reads.Load(),
			n.writes, n.stale, done(), planned, f.upCount(), len(f.workers))
	}
}

// readFinals reads every counter from etcd: raw values under their store
// keys, counts under their routing keys.
func readFinals(ctx context.Context, cli *clientv3.Client) (map[string][]byte, error) {
	prefix := dataPrefix()
	resp, err := cli.Get(ctx, prefix, clientv3.WithPrefix())
	if err != nil {
		return nil, fmt.Errorf("chaos: read final counters: %w", err)
	}
	out := make(map[string][]byte, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		out[string(kv.Key[len(prefix):])] = kv.Value
	}
	return out, nil
}

func dataPrefix() string { return "/" + clusterName + "/data/" }
