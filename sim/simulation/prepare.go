package simulation

import (
	"context"
	"errors"
	"hash/fnv"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/tenure-go/tenure/internal/clock"
	"github.com/tenure-go/tenure/ownership"
)

// preparers is what the simulated nodes do when a planned move makes them
// the next owner of a partition (ownership.Callbacks.OnPrepare): drawn
// from the seed, the node, the partition and how often the node prepared
// it, a preparation returns at once, takes a while (up to twice the warm
// timeout, on the virtual clock), or hangs until it is called off or the
// move goes on without it. A node that crashes, pauses past its TTL or is
// cut off while it prepares loses its preparation with its session. The
// nodes write nothing during a preparation: they hold no token; the
// checkers then see whether the moves that follow stay safe.
type preparers struct {
	seed uint64
	warm time.Duration
	fc   clockwork.Clock

	mu    sync.Mutex
	count map[string]uint64 // "<node>/<partition>": preparations so far

	Prepares, Hung, Slow, Lost atomic.Int64
}

func newPreparers(seed uint64, warm time.Duration, fc clockwork.Clock) *preparers {
	return &preparers{seed: seed, warm: warm, fc: fc, count: map[string]uint64{}}
}

// draw returns a number fixed by the seed, the node, the partition and
// the node's count of preparations of it.
func (pr *preparers) draw(node string, p int) uint64 {
	k := node + "/" + strconv.Itoa(p)
	pr.mu.Lock()
	n := pr.count[k]
	pr.count[k] = n + 1
	pr.mu.Unlock()
	h := fnv.New64a()
	_, _ = h.Write([]byte(k))
	x := h.Sum64() ^ pr.seed*0x9e3779b97f4a7c15 ^ (n+1)*0xbf58476d1ce4e5b9
	// splitmix64's finalizer
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// onPrepare returns node's OnPrepare.
func (pr *preparers) onPrepare(node string) func(ownership.Event) error {
	return func(e ownership.Event) error {
		pr.Prepares.Add(1)
		d := pr.draw(node, e.Partition)
		defer func() {
			if errors.Is(context.Cause(e.Context), ownership.ErrLost) {
				pr.Lost.Add(1)
			}
		}()
		switch d % 4 {
		case 0: // hangs until the preparation is over
			pr.Hung.Add(1)
			<-e.Context.Done()
			return context.Cause(e.Context)
		case 1: // slow: up to twice the warm timeout
			pr.Slow.Add(1)
			if !clock.Sleep(e.Context, pr.fc, time.Duration((d>>8)%uint64(2*pr.warm+1))) {
				return context.Cause(e.Context)
			}
		}
		return nil
	}
}
