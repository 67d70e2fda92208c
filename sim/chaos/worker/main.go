//go:build unix

// Command worker is one node of a chaos run (sim/chaos): it joins the fleet
// with ownership.Join, its store being an etcdfence.Store that the node
// fences, and serves through router.Handler
//
//	POST /incr/{key}   add one to key's counter, at most once per Idempotency-Key
//	GET  /count/{key}  read key's counter
//
// under the token of the key's partition. A failure of etcd is answered
// with a retryable "unavailable" refusal (router.WriteError has no answer
// for it; the client retries with the same idempotency key). It reports on its standard output,
// one JSON line each (sim/chaos/internal/wire), when it listens and joins,
// every tenure it begins and ends, and every write it attempts and the
// outcome it learned; each line is written before the step it announces, in
// one write, so a line survives a SIGKILL that follows it. Its node's logs go
// to standard error.
//
// SIGUSR1 arms a pause for one second: the next increment that has read its
// counter within it stops the whole process with SIGSTOP before it writes
// (after a "stopping" line), the worst moment for a pause; the runner
// resumes it with SIGCONT.
//
// It exits when its standard input ends (the runner holds the pipe), on
// SIGTERM or SIGINT after leaving the fleet gracefully, and at once on
// SIGKILL.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/go-hclog"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/fence/httpfence"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/chaos/internal/wire"
)

func main() { os.Exit(run()) }

type flags struct {
	endpoints, cluster, name, logLevel string
	partitions, run                    int
	ttl, drain, writeTimeout           time.Duration
}

func run() int {
	var f flags
	flag.StringVar(&f.endpoints, "endpoints", "", "comma-separated etcd endpoints")
	flag.StringVar(&f.cluster, "cluster", "chaos", "cluster name")
	flag.StringVar(&f.name, "name", "", "node ID")
	flag.IntVar(&f.partitions, "partitions", 64, "partitions")
	flag.IntVar(&f.run, "run", 1, "which run of this node ID the process is (write IDs are unique across runs)")
	flag.DurationVar(&f.ttl, "ttl", 2*time.Second, "session TTL")
	flag.DurationVar(&f.drain, "drain", 2*time.Second, "drain timeout")
	flag.DurationVar(&f.writeTimeout, "write-timeout", 2*time.Second, "bound of one store operation")
	flag.StringVar(&f.logLevel, "log-level", "info", "node log level (stderr)")
	flag.Parse()

	out := &reporter{w: os.Stdout}
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		fmt.Fprintln(os.Stderr, "worker: standard input closed: the runner is gone")
		os.Exit(3)
	}()
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := serve(ctx, f, out); err != nil {
		out.emit(wire.Event{Kind: wire.Failed, Err: err.Error()})
		fmt.Fprintln(os.Stderr, "worker:", err)
		return 1
	}
	return 0
}

// reporter writes events, one line per write(2).
type reporter struct {
	mu sync.Mutex
	w  io.Writer
}

func (r *reporter) emit(e wire.Event) {
	e.T = time.Now().UnixNano()
	b, _ := json.Marshal(e)
	b = append(b, '\n')
	r.mu.Lock()
	_, _ = r.w.Write(b)
	r.mu.Unlock()
}

func serve(ctx context.Context, f flags, out *reporter) error {
	if f.name == "" || f.endpoints == "" {
		return errors.New("-name and -endpoints are required")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	out.emit(wire.Event{Kind: wire.Listening, Addr: ln.Addr().String()})

	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            strings.Split(f.endpoints, ","),
		DialTimeout:          2 * time.Second,
		DialKeepAliveTime:    time.Second,
		DialKeepAliveTimeout: time.Second,
		Logger:               zap.NewNop(),
	})
	if err != nil {
		return err
	}
	defer cli.Close()
	store, err := etcdfence.New(cli, etcdfence.Config{Cluster: f.cluster, Prefix: "/" + f.cluster + "/data/"})
	if err != nil {
		return err
	}
	logger := hclog.New(&hclog.LoggerOptions{Name: f.name, Output: os.Stderr, Level: hclog.LevelFromString(f.logLevel)})

	cfg := ownership.DefaultConfig()
	cfg.Cluster = f.cluster
	cfg.NodeID = f.name
	cfg.Addr = ln.Addr().String()
	cfg.Ring.Partitions = f.partitions
	cfg.Session = election.SessionConfig{TTL: f.ttl}
	cfg.DrainTimeout = f.drain
	cfg.Fencers = []fence.Fencer{store}
	cfg.Logger = logger
	cfg.Callbacks = ownership.Callbacks{
		OnAcquired: func(e ownership.Event) {
			out.emit(wire.Event{Kind: wire.Acquired, P: e.Partition, Epoch: e.Token.Epoch})
		},
		OnReleased: func(e ownership.Event) {
			out.emit(wire.Event{Kind: wire.Released, P: e.Partition, Epoch: e.Token.Epoch, Reason: reasonLabel(e.Reason)})
		},
	}
	node, err := join(ctx, cli, cfg, logger)
	if err != nil {
		return err
	}
	out.emit(wire.Event{Kind: wire.Joined})
	rt, err := router.New(node, router.Config{Logger: logger})
	if err != nil {
		_ = node.Close(context.Background())
		return err
	}
	app := &app{name: f.name + "." + strconv.Itoa(f.run), store: store, out: out, timeout: f.writeTimeout}
	incr, err := rt.Handler(router.KeyFromPathValue("key"), http.HandlerFunc(app.incr))
	if err != nil {
		return err
	}
	count, err := rt.Handler(router.KeyFromPathValue("key"), http.HandlerFunc(app.count))
	if err != nil {
		return err
	}
	app.cont = make(chan os.Signal, 1)
	signal.Notify(app.cont, syscall.SIGCONT)
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	go func() {
		for range usr1 {
			app.armed.Store(time.Now().Add(time.Second).UnixNano())
		}
	}()
	mux := http.NewServeMux()
	mux.Handle("POST /incr/{key}", incr)
	mux.Handle("GET /count/{key}", count)
	mux.Handle("/", node.HealthHandler())
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()

	select {
	case <-ctx.Done():
	case err = <-served:
	case <-node.Done():
		err = errors.New("node stopped")
	}
	// Leave gracefully: partitions drain and hand off, then stop serving.
	cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cerr := node.Close(cctx)
	rt.Close()
	_ = srv.Shutdown(cctx)
	return errors.Join(err, cerr)
}

// join joins the fleet, retrying while etcd does not answer or the ID is
// still held by this worker's previous run (a crash leaves its member key
// until its lease expires).
func join(ctx context.Context, cli *clientv3.Client, cfg ownership.Config, logger hclog.Logger) (*ownership.Node, error) {
	for {
		jctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		node, err := ownership.Join(jctx, cli, cfg)
		cancel()
		if err == nil {
			return node, nil
		}
		if !errors.Is(err, ownership.ErrDuplicateMember) && !errors.Is(err, ownership.ErrUnavailable) && ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
			return nil, err
		}
		logger.Info("join: retrying", "error", err)
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// app is the worker's local handler: counters in the fenced store.
type app struct {
	name    string
	store   *etcdfence.Store
	out     *reporter
	timeout time.Duration
	seq     atomic.Int64
	armed   atomic.Int64 // stop before the next write until then (Unix nanoseconds)
	cont    chan os.Signal
}

// stop stops the process with SIGSTOP and returns once it has been
// continued. kill(2) returns before every thread has stopped, so without
// the wait the write could go out before the stop takes hold.
func (a *app) stop() {
	for {
		select {
		case <-a.cont: // an old SIGCONT
			continue
		default:
		}
		break
	}
	_ = syscall.Kill(os.Getpid(), syscall.SIGSTOP)
	select {
	case <-a.cont:
	case <-time.After(time.Minute):
	}
}

func (a *app) incr(w http.ResponseWriter, r *http.Request) {
	tok, ok := fence.FromContext(r.Context())
	if !ok {
		http.Error(w, "no fencing token", http.StatusInternalServerError)
		return
	}
	key, idem := r.PathValue("key"), r.Header.Get(router.HeaderIdempotencyKey)
	if idem == "" {
		http.Error(w, "no idempotency key", http.StatusBadRequest)
		return
	}
	// The work runs on a context that the end of the tenure does not
	// cancel, as in a process that does not look at its context between
	// its read and its write (or is paused there): only the store's fence
	// stops a write under a token whose tenure ended.
	if d, err := strconv.ParseInt(r.Header.Get(wire.AttemptDeadline), 10, 64); err == nil && time.Now().UnixNano() > d {
		_ = httpfence.WriteRefusal(w, &httpfence.Refusal{Kind: httpfence.RefusalUnavailable, Message: "attempt past its deadline"})
		return
	}
	n, err := a.apply(context.WithoutCancel(r.Context()), tok, key, idem)
	if err != nil {
		writeError(w, r, err)
		return
	}
	fmt.Fprintln(w, n)
}

// apply adds increment idem to key's counter under t, at most once, and
// returns the counter after it. A compare-and-swap that finds another
// version (an earlier attempt of the same request, still running) reads
// again.
func (a *app) apply(ctx context.Context, t fence.Token, key, idem string) (int64, error) {
	for range 8 {
		octx, cancel := context.WithTimeout(ctx, a.timeout)
		item, err := a.store.Get(octx, t, wire.CounterKey(key))
		cancel()
		if err != nil {
			return 0, err
		}
		cur, err := wire.DecodeCounter(item.Value)
		if err != nil {
			return 0, err
		}
		if cur.Has(idem) {
			return cur.N, nil
		}
		id := a.name + "#" + strconv.FormatInt(a.seq.Add(1), 10)
		next := cur.Next(idem, id)
		val := next.Encode()
		if until := a.armed.Load(); until != 0 && time.Now().UnixNano() < until && a.armed.CompareAndSwap(until, 0) {
			a.out.emit(wire.Event{Kind: wire.Stopping, W: id, Key: key, Scope: t.Scope, Epoch: t.Epoch})
			a.stop()
		}
		a.out.emit(wire.Event{Kind: wire.Invoke, W: id, Key: key, Scope: t.Scope, Epoch: t.Epoch, Read: string(item.Value), Value: string(val)})
		octx, cancel = context.WithTimeout(ctx, a.timeout)
		_, err = a.store.CompareAndSwap(octx, t, wire.CounterKey(key), item.Version, val)
		cancel()
		ev := wire.Event{Kind: wire.Return, W: id}
		switch {
		case err == nil:
			ev.Outcome = wire.Accepted
		case errors.Is(err, fence.ErrStale):
			ev.Outcome, ev.Err = wire.Stale, err.Error()
		case errors.Is(err, etcdfence.ErrVersionMismatch):
			ev.Outcome, ev.Err = wire.Conflict, err.Error()
		default:
			ev.Outcome, ev.Err = wire.Unknown, err.Error()
		}
		a.out.emit(ev)
		if ev.Outcome == wire.Conflict {
			continue
		}
		if err != nil {
			return 0, err
		}
		return next.N, nil
	}
	return 0, errors.New("too many conflicting writes")
}

func (a *app) count(w http.ResponseWriter, r *http.Request) {
	tok, ok := fence.FromContext(r.Context())
	if !ok {
		http.Error(w, "no fencing token", http.StatusInternalServerError)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), a.timeout)
	defer cancel()
	item, err := a.store.Get(ctx, tok, wire.CounterKey(r.PathValue("key")))
	if err == nil {
		var c wire.Counter
		if c, err = wire.DecodeCounter(item.Value); err == nil {
			fmt.Fprintln(w, c.N)
			return
		}
	}
	writeError(w, r, err)
}

// writeError answers a request whose work failed with err: with the
// router's refusal if the tenure ended (router.WriteError), else, since
// every failure left is etcd's (a leader change, an unavailable member, a
// timeout) and the client retries with the same idempotency key, with a
// retryable "unavailable" refusal.
func writeError(w http.ResponseWriter, r *http.Request, err error) {
	if router.WriteError(w, r, err) {
		return
	}
	_ = httpfence.WriteRefusal(w, &httpfence.Refusal{Kind: httpfence.RefusalUnavailable, Message: err.Error()})
}

// reasonLabel names why a tenure ended, as the wire and the metrics' reason
// label do: "moved", "lost" or "closed".
func reasonLabel(cause error) string {
	switch cause {
	case ownership.ErrMoved:
		return "moved"
	case ownership.ErrLost:
		return "lost"
	case ownership.ErrClosed:
		return "closed"
	}
	return fmt.Sprint(cause)
}
