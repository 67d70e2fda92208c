package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/ownership"
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
	node    string        // the node whose requests it pauses
	armed   atomic.Int64  // requests still to pause
	paused  chan struct{} // receives one value per paused request
	resume  chan struct{} // closed to let them go on
	results chan error    // the paused writes' outcomes
}

// take reports whether this request of node is one to pause.
func (p *pause) take(node string) bool { return p != nil && p.node == node && p.armed.Add(-1) >= 0 }

// counters is the application every node runs: POST /incr/{key} adds one to
// the key's counter in a fenced store, under the token of the key's
// partition.
type counters struct {
	store   *etcdfence.Store
	timeout time.Duration
	pause   atomic.Pointer[pause]

	staleRejected atomic.Int64 // writes the store refused as stale
	duplicates    atomic.Int64 // retried increments that had already been applied
	cutShort      atomic.Int64 // increments cut short by the end of their tenure
	failed        atomic.Int64 // increments that failed otherwise
}

// pauseNext makes the next n increments served by node pause before their
// write, and returns the pause that releases them.
func (c *counters) pauseNext(node string, n int) *pause {
	p := &pause{node: node, paused: make(chan struct{}, n), resume: make(chan struct{}), results: make(chan error, n)}
	p.armed.Store(int64(n))
	c.pause.Store(p)
	return p
}

// handler is node's local handler; the router calls it only for keys the
// node owns, with the partition's token in the request's context. A failed
// write is answered by router.WriteError: a write the store refused as
// stale, or work cut short by the end of the partition's tenure, gets the
// retryable answer with the next owner's hint, which the router.Client
// follows with the same idempotency key.
func (c *counters) handler(node string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := fence.FromContext(r.Context()) // the store refuses a missing (zero) token
		n, err := c.incr(r.Context(), node, tok, r.PathValue("key"), r.Header.Get(router.HeaderIdempotencyKey))
		switch {
		case err == nil:
			fmt.Fprintln(w, n)
		case !router.WriteError(w, r, err):
			http.Error(w, err.Error(), http.StatusInternalServerError)
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
		return 0, c.count(ctx, err)
	}
	cur, err := decodeCounter(item.Value)
	if err != nil {
		return 0, c.count(ctx, err)
	}
	if cur.last == idem {
		c.duplicates.Add(1)
		return cur.count, nil
	}
	next := counter{count: cur.count + 1, last: idem}
	if p := c.pause.Load(); p.take(node) {
		// A paused process does not notice that its tenure ended: it
		// writes with the token it holds, on a context of its own.
		p.paused <- struct{}{}
		<-p.resume
		wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.timeout)
		defer cancel()
		_, err := c.store.CompareAndSwap(wctx, t, counterKey(key), item.Version, next.encode())
		p.results <- c.count(ctx, err)
		return 0, err
	}
	if _, err := c.store.CompareAndSwap(ctx, t, counterKey(key), item.Version, next.encode()); err != nil {
		return 0, c.count(ctx, err)
	}
	return next.count, nil
}

// count records the failure of an increment, if any, by kind, and returns
// err.
func (c *counters) count(ctx context.Context, err error) error {
	_, ended := ownership.Ended(ctx, err)
	switch {
	case err == nil:
	case errors.Is(err, fence.ErrStale):
		c.staleRejected.Add(1)
	case ended:
		c.cutShort.Add(1)
	default:
		c.failed.Add(1)
	}
	return err
}
