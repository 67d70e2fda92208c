package chaos

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/check"
)

// load drives the fleet through a router.Client from cfg.Clients
// goroutines. Client i owns the keys k with k mod Clients == i and has one
// operation outstanding at a time, so every key has at most one.
type load struct {
	cfg    Config
	client *router.Client
	rec    *check.Recorder
	start  time.Time
	// opTimeout bounds one operation, its retries included.
	opTimeout time.Duration

	incrs, acked, unknown, reads, readsOK atomic.Int64
	latMu                                 sync.Mutex
	latencies                             []time.Duration // acknowledged increments
	errs                                  map[string]int  // errors of increments of unknown outcome
}

func keyName(k int) string { return "k" + strconv.Itoa(k) }

// run drives load until ctx ends; operations under way then finish.
func (l *load) run(ctx context.Context) {
	var wg sync.WaitGroup
	for i := range l.cfg.Clients {
		rng := rand.New(rand.NewPCG(uint64(l.cfg.Seed), uint64(i)+1))
		var keys []string
		for k := i; k < l.cfg.Keys; k += l.cfg.Clients {
			keys = append(keys, keyName(k))
		}
		name := "c" + strconv.Itoa(i)
		wg.Go(func() {
			for seq := 1; ctx.Err() == nil; seq++ {
				key := keys[rng.IntN(len(keys))]
				if rng.Float64() < l.cfg.ReadRatio {
					l.count(name, key)
				} else {
					l.incr(name, key, name+"."+strconv.Itoa(seq))
				}
			}
		})
	}
	wg.Wait()
}

// incr adds one to key's counter with idempotency key idem.
func (l *load) incr(client, key, idem string) {
	l.incrs.Add(1)
	id := l.rec.InvokeOp(check.Op{Client: client, Key: key, Kind: check.Incr, Delta: 1, IdemKey: idem, Invoke: time.Since(l.start)})
	t0 := time.Now()
	n, err := l.send(http.MethodPost, "/incr/"+key, key, idem)
	if err != nil {
		l.unknown.Add(1)
		l.latMu.Lock()
		l.errs[normalize(err.Error())]++
		l.latMu.Unlock()
		l.rec.ReturnOp(id, check.Result{Outcome: check.Unknown})
		return
	}
	l.acked.Add(1)
	l.latMu.Lock()
	l.latencies = append(l.latencies, time.Since(t0))
	l.latMu.Unlock()
	l.rec.ReturnOp(id, check.Result{Outcome: check.Accepted, At: time.Since(l.start), N: n, HasN: true})
}

// count reads key's counter.
func (l *load) count(client, key string) {
	l.reads.Add(1)
	id := l.rec.InvokeOp(check.Op{Client: client, Key: key, Kind: check.Count, Invoke: time.Since(l.start)})
	n, err := l.send(http.MethodGet, "/count/"+key, key, "")
	if err != nil {
		l.rec.ReturnOp(id, check.Result{Outcome: check.Unknown})
		return
	}
	l.readsOK.Add(1)
	l.rec.ReturnOp(id, check.Result{Outcome: check.Accepted, At: time.Since(l.start), N: n})
}

// send sends one request for key to its owner and reads the counter from
// a 200 answer. Any other answer, or none, is an error: the outcome is
// unknown.
func (l *load) send(method, path, key, idem string) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), l.opTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, "http://fleet"+path, nil)
	if err != nil {
		return 0, err
	}
	if idem != "" {
		req.Header.Set(router.HeaderIdempotencyKey, idem)
	}
	resp, err := l.client.Do(ctx, key, req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(body)))
	}
	return strconv.ParseInt(strings.TrimSpace(string(body)), 10, 64)
}
