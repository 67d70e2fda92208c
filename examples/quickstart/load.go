package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/tenure-go/tenure/router"
)

// runLoad runs the workers and, at a quarter, a half and three quarters of
// the increments, kills a node, adds one and removes one.
func (d *demo) runLoad(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var tick <-chan time.Time
	if d.cfg.Rate > 0 {
		t := time.NewTicker(time.Second / time.Duration(d.cfg.Rate))
		defer t.Stop()
		tick = t.C
	}
	eventsDone := make(chan struct{})
	var wg sync.WaitGroup
	errs := make([]error, d.cfg.Workers+1) // the workers', then the events'
	for w := range d.cfg.Workers {
		wg.Go(func() {
			if errs[w] = d.worker(ctx, w, tick, eventsDone); errs[w] != nil {
				cancel()
			}
		})
	}
	wg.Go(func() { d.progress(ctx) })
	if errs[d.cfg.Workers] = d.events(ctx); errs[d.cfg.Workers] != nil {
		cancel()
	}
	close(eventsDone)
	wg.Wait()
	if d.cfg.Progress != nil {
		fmt.Fprintln(d.cfg.Progress)
	}
	return errors.Join(errs...)
}

// worker drives the keys k with k mod Workers == w, one increment at a time,
// round robin, until the target is reached and the events are over.
func (d *demo) worker(ctx context.Context, w int, tick <-chan time.Time, eventsDone <-chan struct{}) error {
	rng := rand.New(rand.NewPCG(uint64(w), 7))
	for seq := 0; ; seq++ {
		for k := w; k < d.cfg.Keys; k += d.cfg.Workers {
			if d.total.Load() >= int64(d.cfg.Increments) && closed(eventsDone) {
				return nil
			}
			if tick != nil {
				select {
				case <-tick:
				case <-ctx.Done():
					return nil
				}
			}
			key := "key-" + strconv.Itoa(k)
			idem := key + "#" + strconv.Itoa(seq)
			if err := d.increment(ctx, key, idem, rng); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return err
			}
			d.acked[k].Add(1)
			d.total.Add(1)
		}
	}
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// increment sends one increment until it is acknowledged. One in five goes
// first to a random node, as a caller that does not know the fleet would
// send it; the rest, and the first if it fails, go through the Client,
// straight to the owner, which retries refusals and failed connections.
// Every attempt carries the same idempotency key, so an increment whose
// acknowledgement was lost is applied once however often it is retried.
func (d *demo) increment(ctx context.Context, key, idem string, rng *rand.Rand) error {
	d.sent.Add(1)
	if rng.IntN(5) == 0 {
		if ids := d.fleet.ids(); len(ids) > 0 {
			if n := d.fleet.get(ids[rng.IntN(len(ids))]); n != nil {
				if err := d.post(ctx, "http://"+n.addr, key, idem); err == nil {
					return nil
				}
				d.retries.Add(1)
			}
		}
	}
	if err := d.post(ctx, "", key, idem); err != nil {
		return fmt.Errorf("increment %s: %w", idem, err)
	}
	return nil
}

// post sends one increment, directly to base, or if base is empty through
// the Client, and returns an error unless it was acknowledged.
func (d *demo) post(ctx context.Context, base, key, idem string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/incr/"+key, http.NoBody)
	if err != nil {
		return err
	}
	req.Header.Set(router.HeaderIdempotencyKey, idem)
	var resp *http.Response
	if base == "" {
		resp, err = d.client.Do(ctx, key, req)
	} else {
		resp, err = d.http.Do(req)
	}
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", resp.Status, bytes.TrimSpace(body))
	}
	return nil
}

// progress writes the progress line until ctx ends.
func (d *demo) progress(ctx context.Context) {
	if d.cfg.Progress == nil {
		return
	}
	t := time.NewTicker(200 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			fmt.Fprintf(d.cfg.Progress, "\r[%6v] %5d/%d acknowledged, %d retries, %d stale writes rejected, nodes %v   ",
				d.since(), d.total.Load(), d.cfg.Increments, d.retried(), d.fleet.app.staleRejected.Load(), d.fleet.ids())
		}
	}
}

// waitAcked waits until n increments are acknowledged.
func (d *demo) waitAcked(ctx context.Context, n int64) error {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for d.total.Load() < n {
		select {
		case <-ctx.Done():
			return errStopped
		case <-t.C:
		}
	}
	return nil
}
