package scenario

import (
	"context"
	"runtime"
	"strconv"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/sim/check"
	"github.com/tenure-go/tenure/sim/memetcd"
)

// ttl is the lease TTL of every scenario.
const ttl = 2 * time.Second

// env is one scenario's world: virtual time driven in the background, an
// in-memory etcd, a recorder and an unfenced store.
type env struct {
	ctx     context.Context // cancelled by close, after the cleanups
	cancel  context.CancelFunc
	cleanup []func() // run by close, in order

	fc    *clockwork.FakeClock
	start time.Time
	srv   *memetcd.Server
	rec   check.Recorder
	stop  chan struct{}
	done  chan struct{}
	clis  []*memetcd.Client

	mu   sync.Mutex
	data map[string]string
}

func newEnv() (*env, error) {
	fc := clockwork.NewFakeClockAt(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	srv, err := memetcd.New(memetcd.Config{Clock: fc})
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &env{ctx: ctx, cancel: cancel, fc: fc, start: fc.Now(), srv: srv, stop: make(chan struct{}), done: make(chan struct{}), data: map[string]string{}}
	e.rec.SetInitial("k", "0") // every scenario's counter
	go func() {
		defer close(e.done)
		for {
			select {
			case <-e.stop:
				return
			default:
			}
			for range 8 {
				runtime.Gosched()
			}
			time.Sleep(50 * time.Microsecond)
			fc.Advance(10 * time.Millisecond)
		}
	}()
	return e, nil
}

// onClose has close run f, after the functions given before it.
func (e *env) onClose(f func()) { e.cleanup = append(e.cleanup, f) }

// close runs the cleanups, cancels e.ctx, closes the clients and stops
// time and etcd: time stops last, since the cleanups may need it.
func (e *env) close() {
	for _, f := range e.cleanup {
		f()
	}
	e.cancel()
	for _, c := range e.clis {
		_ = c.Close()
	}
	close(e.stop)
	<-e.done
	e.srv.Close()
}

func (e *env) now() time.Duration { return e.fc.Now().Sub(e.start) }

func (e *env) client() *memetcd.Client {
	c := e.srv.NewClient()
	e.clis = append(e.clis, c)
	return c
}

// etcdClient wraps a memetcd client as a *clientv3.Client for etcd's
// concurrency package.
func (e *env) etcdClient(ctx context.Context, c *memetcd.Client) *clientv3.Client {
	cli := clientv3.NewCtxClient(ctx)
	cli.KV, cli.Lease, cli.Watcher = c, c, c
	return cli
}

// sleep waits d of virtual time.
func (e *env) sleep(d time.Duration) {
	t := e.fc.NewTimer(d)
	defer t.Stop()
	<-t.Chan()
}

// waitFor polls cond on virtual time for up to limit.
func (e *env) waitFor(limit time.Duration, cond func() bool) bool {
	deadline := e.now() + limit
	for e.now() < deadline {
		if cond() {
			return true
		}
		e.sleep(10 * time.Millisecond)
	}
	return cond()
}

// incrUnfenced is a read-modify-write increment of key on the unfenced
// store, recorded under (scope, epoch) by writer, from the value read.
func (e *env) incrUnfenced(key, scope string, epoch int64, writer string, read int64) {
	id := e.rec.InvokeWrite(check.Write{Key: key, Scope: scope, Epoch: epoch, Writer: writer, Invoke: e.now(),
		Read: strconv.FormatInt(read, 10), HasRead: true, Value: strconv.FormatInt(read+1, 10)})
	e.mu.Lock()
	e.data[key] = strconv.FormatInt(read+1, 10)
	e.rec.Applied(id, e.now())
	e.mu.Unlock()
	e.rec.ReturnWrite(id, check.Accepted, e.now())
}

func (e *env) readUnfenced(key string) int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	n, _ := strconv.ParseInt(e.data[key], 10, 64)
	return n
}

// report checks the history, with the unfenced store's final values
// unless final is given.
func (e *env) report(final map[string]string) (*check.Report, error) {
	e.mu.Lock()
	if final == nil {
		final = e.data
	}
	for k, v := range final {
		e.rec.SetFinal(k, v)
	}
	e.mu.Unlock()
	return check.All(e.rec.History(), check.Config{})
}
