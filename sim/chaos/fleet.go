//go:build unix

package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tenure-go/tenure/internal/childproc"
	"github.com/tenure-go/tenure/sim/chaos/internal/wire"
	"github.com/tenure-go/tenure/sim/check"
	"github.com/tenure-go/tenure/sim/cluster"
)

// fleet is the run's workers and what they report.
type fleet struct {
	cfg     Config
	bin     string
	cluster string // the fleet's cluster name
	start   time.Time
	rec     *check.Recorder

	mu      sync.Mutex
	workers []*worker
	writes  map[string]check.WriteID // worker's write ID -> recorder's
	reasons map[tenureID]string      // how each ended tenure ended
	losses  []loss                   // sessions lost (releases for ownership.ErrLost), per worker and time
	counts  counts
	exits   []string          // workers that exited on their own
	faults  []faultRecord     // injected so far
	latest  map[int]int64     // partition -> newest epoch acquired by anyone
	stopped map[string]string // writes whose worker stopped itself before them -> what they write
	paused  []pausedWrite
	// unknownErrs counts the errors of writes of unknown outcome.
	unknownErrs map[string]int
}

// pausedWrite is the outcome of a write whose worker was paused between
// its read and its write.
type pausedWrite struct{ what, outcome, err string }

// tenureID names one tenure.
type tenureID struct {
	scope  string
	epoch  int64
	holder string
}

// loss is a worker's tenures lost at one time.
type loss struct {
	worker string
	at     time.Duration
}

// counts are the run's tallies of what workers reported.
type counts struct {
	acquired, released                          int
	writes, accepted, stale, conflicts, unknown int
}

// worker is one worker: an ID that stays across restarts, its FaultPoint,
// and its current process.
type worker struct {
	name string
	fp   *cluster.FaultPoint
	logs *childproc.Tail

	// Guarded by fleet.mu.
	proc        *process
	runs        int
	joined      bool
	killed      bool          // the current process was killed on purpose
	held        map[int]int64 // partition -> epoch of the tenures it holds
	joinedc     chan struct{} // closed when the current process joined
	stopping    chan string   // receives the write a process stopped itself before
	listenAddr  string
	lastJoinErr string
}

func (f *fleet) since(unixNano int64) time.Duration {
	return time.Unix(0, unixNano).Sub(f.start)
}

func (f *fleet) now() time.Duration { return time.Since(f.start) }

// startWorker starts (or restarts) w's process.
func (f *fleet) startWorker(w *worker) error {
	args := []string{ // -run is added below
		"-endpoints", strings.Join(w.fp.Endpoints(), ","),
		"-cluster", f.cluster,
		"-name", w.name,
		"-partitions", strconv.Itoa(f.cfg.Partitions),
		"-ttl", f.cfg.TTL.String(),
	}
	f.mu.Lock()
	w.runs++
	args = append(args, "-run", strconv.Itoa(w.runs))
	w.joined, w.killed = false, false
	w.held = make(map[int]int64)
	joinedc := make(chan struct{})
	w.joinedc = joinedc
	f.mu.Unlock()
	var once sync.Once
	p, err := startProcess(f.bin, args, func(line []byte) { f.event(w, line, func() { once.Do(func() { close(joinedc) }) }) }, w.logs)
	if err != nil {
		return err
	}
	f.mu.Lock()
	w.proc = p
	f.mu.Unlock()
	go func() {
		<-p.Exited()
		f.mu.Lock()
		defer f.mu.Unlock()
		if w.proc == p && !w.killed {
			f.exits = append(f.exits, fmt.Sprintf("%s exited on its own (%v): %s", w.name, p.Err(), w.logs.String()))
			f.endHeld(w, f.now())
			w.joined = false
		}
	}()
	return nil
}

// waitJoined waits until w's current process joined the fleet.
func (f *fleet) waitJoined(ctx context.Context, w *worker) error {
	f.mu.Lock()
	c, p := w.joinedc, w.proc
	f.mu.Unlock()
	select {
	case <-c:
		return nil
	case <-p.Exited():
		return fmt.Errorf("chaos: worker %s exited before it joined (%v): %s", w.name, p.Err(), w.logs.String())
	case <-ctx.Done():
		return fmt.Errorf("chaos: worker %s did not join: %w", w.name, ctx.Err())
	}
}

// killWorker kills w's process (SIGKILL); its tenures end now.
func (f *fleet) killWorker(w *worker) {
	f.mu.Lock()
	p := w.proc
	w.killed, w.joined = true, false
	f.mu.Unlock()
	if p == nil {
		return
	}
	p.Kill()
	f.mu.Lock()
	f.endHeld(w, f.now())
	f.mu.Unlock()
}

// endHeld ends every tenure w holds at at (it crashed). f.mu is held.
func (f *fleet) endHeld(w *worker, at time.Duration) {
	for p, e := range w.held {
		scope := scopeOf(p)
		f.rec.EndTenure(scope, e, w.name, at)
		f.reasons[tenureID{scope, e, w.name}] = "crashed"
	}
	clear(w.held)
}

func scopeOf(p int) string { return "p/" + strconv.Itoa(p) }

// event handles one line of w's standard output.
func (f *fleet) event(w *worker, line []byte, joined func()) {
	var e wire.Event
	if err := json.Unmarshal(line, &e); err != nil {
		return
	}
	at := f.since(e.T)
	f.mu.Lock()
	defer f.mu.Unlock()
	switch e.Kind {
	case wire.Listening:
		w.listenAddr = e.Addr
	case wire.Joined:
		w.joined = true
		joined()
	case wire.Acquired:
		f.counts.acquired++
		w.held[e.P] = e.Epoch
		f.latest[e.P] = max(f.latest[e.P], e.Epoch)
		f.rec.BeginTenure(scopeOf(e.P), e.Epoch, w.name, at)
	case wire.Released:
		f.counts.released++
		delete(w.held, e.P)
		f.rec.EndTenure(scopeOf(e.P), e.Epoch, w.name, at)
		f.reasons[tenureID{scopeOf(e.P), e.Epoch, w.name}] = e.Reason
		if e.Reason == "lost" && (len(f.losses) == 0 || f.losses[len(f.losses)-1] != loss{w.name, at}) {
			f.losses = append(f.losses, loss{w.name, at})
		}
	case wire.Invoke:
		f.counts.writes++
		id := f.rec.InvokeWrite(check.Write{Key: wire.CounterKey(e.Key), Scope: e.Scope, Epoch: e.Epoch, Writer: w.name,
			Invoke: at, Value: e.Value, Read: e.Read, HasRead: true})
		f.writes[e.W] = id
	case wire.Return:
		if what, ok := f.stopped[e.W]; ok {
			delete(f.stopped, e.W)
			f.paused = append(f.paused, pausedWrite{what: what, outcome: e.Outcome, err: e.Err})
		}
		id, ok := f.writes[e.W]
		if !ok {
			return
		}
		o := check.Unknown
		switch e.Outcome {
		case wire.Accepted:
			o = check.Accepted
			f.counts.accepted++
		case wire.Stale:
			o = check.Rejected
			f.counts.stale++
		case wire.Conflict:
			o = check.Rejected
			f.counts.conflicts++
		default:
			f.counts.unknown++
			f.unknownErrs[normalize(e.Err)]++
		}
		f.rec.ReturnWrite(id, o, at)
	case wire.Stopping:
		what := fmt.Sprintf("%s under %s@%d", e.Key, e.Scope, e.Epoch)
		f.stopped[e.W] = what
		select {
		case w.stopping <- what:
		default:
		}
	case wire.Failed:
		w.lastJoinErr = e.Err
	}
}

// upCount returns how many workers have joined and are not stopped.
func (f *fleet) upCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, w := range f.workers {
		if w.joined {
			n++
		}
	}
	return n
}

// close stops every worker: gracefully if grace > 0, else by SIGKILL.
func (f *fleet) close(grace time.Duration) {
	f.mu.Lock()
	var ws []*worker
	for _, w := range f.workers {
		if w.proc != nil {
			ws = append(ws, w)
		}
	}
	f.mu.Unlock()
	var wg sync.WaitGroup
	for _, w := range ws {
		wg.Go(func() {
			f.mu.Lock()
			p := w.proc
			w.killed = true // an exit now is ours
			f.mu.Unlock()
			if grace > 0 {
				p.term(grace)
			} else {
				p.Kill()
			}
			f.mu.Lock()
			f.endHeld(w, f.now())
			f.mu.Unlock()
		})
	}
	wg.Wait()
}

// heldBy returns a copy of the tenures w holds.
func (f *fleet) heldBy(w *worker) map[int]int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(w.held)
}

// taken reports whether every partition of held has a newer tenure.
func (f *fleet) taken(held map[int]int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	for p, e := range held {
		if f.latest[p] <= e {
			return false
		}
	}
	return true
}
