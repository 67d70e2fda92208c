package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/router"
)

// counterKey is where the counter of a routing key lives in the store.
func counterKey(key string) string { return "counters/" + key }

// counter is the value of one counter: its count and the idempotency key of
// the increment that set it. Each key has at most one increment outstanding
// at a time (one worker drives it), so remembering the last one is enough to
// apply every increment at most once when its acknowledgement is lost and
// the caller retries it.
type counter struct {
	count int64
	last  string
}

func (c counter) encode() []byte { return []byte(strconv.FormatInt(c.count, 10) + " " + c.last) }

func decodeCounter(b []byte) (counter, error) {
	if len(b) == 0 {
		return counter{}, nil
	}
	n, last, ok := strings.Cut(string(b), " ")
	count, err := strconv.ParseInt(n, 10, 64)
	if !ok || err != nil || count < 0 {
		return counter{}, fmt.Errorf("corrupt counter %q", b)
	}
	return counter{count: count, last: last}, nil
}

// pause holds requests of a node between their read and their write, as a
// garbage-collection pause or SIGSTOP would: a paused process does not look
// at its context again before it writes. Only the store can stop it.
type pause struct {
	armed   atomic.Int64  // requests still to pause
	paused  chan struct{} // receives one value per paused request
	resume  chan struct{} // closed to let them go on
	results chan error    // the paused writes' outcomes
}

func newPause(n int) *pause {
	p := &pause{paused: make(chan struct{}, n), resume: make(chan struct{}), results: make(chan error, n)}
	p.armed.Store(int64(n))
	return p
}

// take reports whether this request is one to pause.
func (p *pause) take() bool {
	for {
		n := p.armed.Load()
		if n <= 0 {
			return false
		}
		if p.armed.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

// counters is the application every node runs: POST /incr/{key} adds one to
// the key's counter in a fenced store, under the token of the key's
// partition.
type counters struct {
	store   *etcdfence.Store
	timeout time.Duration

	mu     sync.Mutex
	pauses map[string]*pause // node ID -> its pending pause

	staleRejected atomic.Int64 // writes the store refused as stale
	duplicates    atomic.Int64 // retried increments that had already been applied
	failed        atomic.Int64 // writes that failed for another reason
}

// pauseNext makes the next n increments served by node pause before their
// write, and returns the pause that releases them.
func (c *counters) pauseNext(node string, n int) *pause {
	p := newPause(n)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.pauses[node] = p
	return p
}

func (c *counters) pauseFor(node string) *pause {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.pauses[node]
}

// handler is node's local handler; the router calls it only for keys the
// node owns, with the partition's token in the request's context.
func (c *counters) handler(node string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, ok := fence.FromContext(r.Context())
		if !ok {
			http.Error(w, "no fencing token", http.StatusInternalServerError)
			return
		}
		key := r.PathValue("key")
		idem := r.Header.Get(router.HeaderIdempotencyKey)
		n, err := c.incr(r.Context(), node, tok, key, idem)
		switch {
		case errors.Is(err, fence.ErrStale):
			http.Error(w, err.Error(), http.StatusConflict)
		case err != nil:
			http.Error(w, err.Error(), http.StatusInternalServerError)
		default:
			fmt.Fprintln(w, n)
		}
	})
}

// incr applies the increment idem of key under t, at most once, and returns
// the counter's new value.
func (c *counters) incr(ctx context.Context, node string, t fence.Token, key, idem string) (int64, error) {
	if idem == "" {
		return 0, errors.New("increment without an idempotency key")
	}
	item, err := c.store.Get(ctx, t, counterKey(key))
	if err != nil {
		return 0, c.count(err)
	}
	cur, err := decodeCounter(item.Value)
	if err != nil {
		return 0, c.count(err)
	}
	if cur.last == idem {
		c.duplicates.Add(1)
		return cur.count, nil
	}
	next := counter{count: cur.count + 1, last: idem}
	if p := c.pauseFor(node); p != nil && p.take() {
		// A paused process does not notice that its tenure ended: it
		// writes with the token it holds, on a context of its own.
		p.paused <- struct{}{}
		<-p.resume
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
		defer cancel()
		_, err := c.store.CompareAndSwap(wctx, t, counterKey(key), item.Version, next.encode())
		p.results <- c.count(err)
		return 0, err
	}
	if _, err := c.store.CompareAndSwap(ctx, t, counterKey(key), item.Version, next.encode()); err != nil {
		return 0, c.count(err)
	}
	return next.count, nil
}

// count records a failed write by kind and returns err.
func (c *counters) count(err error) error {
	switch {
	case err == nil:
	case errors.Is(err, fence.ErrStale):
		c.staleRejected.Add(1)
	default:
		c.failed.Add(1)
	}
	return err
}
