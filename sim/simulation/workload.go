package simulation

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/tenure-go/tenure/internal/clock"

	"github.com/tenure-go/tenure/sim/check"
)

// attempt is what one try of an operation learned.
type attempt uint8

const (
	// retry: nothing was written; try again (wrong owner, lock busy, a
	// stale token refused, a read that failed).
	retry attempt = iota
	// done: the operation took effect (n valid if hasN).
	done
	// maybe: a write may have landed (outcome unknown); retry with the
	// same idempotency key.
	maybe
)

// executor runs one try of a client's operation under a strategy.
type executor interface {
	// incr tries once to add 1 to key under idempotency key idem.
	incr(ctx context.Context, c *client, key, idem string) (a attempt, n int64, hasN bool)
	// count tries once to read key's counter.
	count(ctx context.Context, c *client, key string) (a attempt, n int64)
	// close stops the strategy's nodes; crashed nodes are abandoned.
	close()
	// final returns key's stored value.
	final(key string) string
}

// client issues a seeded sequence of operations on random keys.
type client struct {
	w    *world
	idx  int
	name string
	rng  *rand.Rand
	ex   executor
}

// opDeadline bounds one operation, retries included.
func (c *client) opDeadline() time.Duration { return 4 * c.w.cfg.TTL }

func (c *client) run(ctx context.Context) {
	for seq := 0; ctx.Err() == nil; seq++ {
		key := keyName(c.rng.IntN(c.w.cfg.Keys))
		if c.rng.IntN(5) == 0 {
			c.doCount(ctx, key)
		} else {
			c.doIncr(ctx, key, fmt.Sprintf("%s-%d", c.name, seq))
		}
		if !clock.Sleep(ctx, c.w.fc, time.Duration(c.rng.IntN(50))*time.Millisecond) {
			return
		}
	}
}

// backoff waits before a retry.
func (c *client) backoff(ctx context.Context) bool {
	return clock.Sleep(ctx, c.w.fc, time.Duration(10+c.rng.IntN(40))*time.Millisecond)
}

func (c *client) doIncr(ctx context.Context, key, idem string) {
	w := c.w
	id := w.rec.InvokeOp(check.Op{Client: c.name, Key: key, Kind: check.Incr, Delta: 1, IdemKey: idem, Invoke: w.now()})
	deadline := w.now() + c.opDeadline()
	unknown := false
	for ctx.Err() == nil && w.now() < deadline {
		a, n, hasN := c.ex.incr(ctx, c, key, idem)
		switch a {
		case done:
			w.rec.ReturnOp(id, check.Result{Outcome: check.Accepted, At: w.now(), N: n, HasN: hasN})
			return
		case maybe:
			unknown = true
		}
		if !c.backoff(ctx) {
			break
		}
	}
	if !unknown {
		w.rec.ReturnOp(id, check.Result{Outcome: check.Rejected, At: w.now()})
	}
	// Otherwise the outcome stays unknown.
}

func (c *client) doCount(ctx context.Context, key string) {
	w := c.w
	id := w.rec.InvokeOp(check.Op{Client: c.name, Key: key, Kind: check.Count, Invoke: w.now()})
	deadline := w.now() + c.opDeadline()
	for ctx.Err() == nil && w.now() < deadline {
		if a, n := c.ex.count(ctx, c, key); a == done {
			w.rec.ReturnOp(id, check.Result{Outcome: check.Accepted, At: w.now(), N: n})
			return
		}
		if !c.backoff(ctx) {
			break
		}
	}
	w.rec.ReturnOp(id, check.Result{Outcome: check.Rejected, At: w.now()})
}

// write records a read-modify-write attempt and returns its ID; finish
// records its outcome.
func (w *world) invokeWrite(key, scope string, epoch int64, writer string, read, value int64) check.WriteID {
	return w.rec.InvokeWrite(check.Write{Key: key, Scope: scope, Epoch: epoch, Writer: writer, Invoke: w.now(),
		Read: fmt.Sprint(read), HasRead: true, Value: fmt.Sprint(value)})
}
