//go:build unix

package ownership

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/cluster"
)

// rollingFleet is the nodes of a rolling restart, each in its own
// process, by ID.
type rollingFleet struct {
	mu       sync.Mutex
	children map[string]*child
	gen      map[string]int // how many times each node was started
}

// set records c as node id's current process.
func (f *rollingFleet) set(id string, c *child) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.children[id] = c
	f.gen[id]++
}

// targets returns the scrape target of each current process: its
// instance label (ID and start count, as a restarted process is a new
// target) and its metrics URL.
func (f *rollingFleet) targets() map[string]string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := map[string]string{}
	for id, c := range f.children {
		out[id+"#"+strconv.Itoa(f.gen[id])] = "http://" + c.address() + "/metrics"
	}
	return out
}

// servedBy returns nil once every partition's route, as o sees it, is
// its ring owner among ids, at the address its process listens on.
func (f *rollingFleet) servedBy(o *fleet.Observer, cfg ring.Config, ids ...string) error {
	r, err := ring.New(ids, cfg)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for p := range cfg.Partitions {
		owner, _ := r.Owner(p)
		got := o.LookupPartition(p)
		if got.Owner != owner || got.Epoch == 0 || got.Addr != f.children[owner].address() {
			return fmt.Errorf("partition %d: route %+v, ring owner %s", p, got, owner)
		}
	}
	return nil
}

// A rolling restart, each of three nodes in its own process stopped
// gracefully (SIGTERM: Close hands its partitions off) and started again
// while clients send work to the owners, is no failover, no session loss,
// nothing to alert on: scraped over HTTP every 200ms and evaluated by
// Prometheus's engine at every scrape, none of the README's suggested
// alerts fires, and no node counts a failover.
func TestAlertsSilentThroughRollingRestart(t *testing.T) {
	rules := readmeAlerts(t)
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	const P, name = 32, "alertroll"
	ids := []string{"n1", "n2", "n3"}
	ringCfg := testConfig(t, name, "n1", P).Ring
	f := &rollingFleet{children: map[string]*child{}, gen: map[string]int{}}
	for _, id := range ids {
		f.set(id, startChild(t, c.Endpoints(), name, id, P))
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	o, err := fleet.Observe(ctx, cli, fleet.ObserverConfig{Cluster: name, Ring: ringCfg})
	require.NoError(t, err)
	defer o.Close()
	waitObserver(t, o, func() error { return f.servedBy(o, ringCfg, ids...) })

	// The scrapes, and the work: clients route each key to its owner as
	// the observer sees it.
	var sc scrapes
	var wg sync.WaitGroup
	var served, refused, failed atomic.Int64
	wg.Go(func() {
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			for inst, url := range f.targets() {
				_ = sc.scrape(inst, url) // a process that is leaving answers no more
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	})
	client := &http.Client{Timeout: 5 * time.Second}
	for w := range 2 {
		wg.Go(func() {
			tick := time.NewTicker(5 * time.Millisecond)
			defer tick.Stop()
			for i := 0; ; i++ {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				key := fmt.Sprintf("key-%d-%d", w, i%500)
				r := o.Lookup(key)
				if r.Addr == "" {
					continue
				}
				resp, err := client.Get("http://" + r.Addr + "/work?key=" + key)
				switch {
				case err != nil:
					failed.Add(1)
				case resp.StatusCode == http.StatusOK:
					served.Add(1)
				default:
					refused.Add(1)
				}
				if err == nil {
					resp.Body.Close()
				}
			}
		})
	}

	for i, id := range ids {
		f.mu.Lock()
		old := f.children[id]
		f.mu.Unlock()
		require.NoError(t, old.proc.Signal(syscall.SIGTERM))
		select {
		case <-old.proc.Exited():
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not leave", id)
		}
		require.NoError(t, old.proc.Err(), "%s left gracefully", id)
		rest := append(append([]string(nil), ids[:i]...), ids[i+1:]...)
		waitObserver(t, o, func() error { return f.servedBy(o, ringCfg, rest...) })
		f.set(id, startChild(t, c.Endpoints(), name, id, P))
		waitObserver(t, o, func() error { return f.servedBy(o, ringCfg, ids...) })
	}
	for _, id := range ids {
		f.mu.Lock()
		ch := f.children[id]
		f.mu.Unlock()
		ch.wait(t, id+" ready", func() error { return ch.ready() })
	}
	cancel()
	wg.Wait()
	for inst, url := range f.targets() {
		require.NoError(t, sc.scrape(inst, url))
	}

	st := sc.stored()
	instants := sc.instants()
	for _, r := range rules {
		for _, at := range instants {
			if fired := st.firing(t, r.Expr, at); len(fired) > 0 {
				assert.Empty(t, fired, "%s fired at %v: %s", r.Alert, at.Format(time.StampMilli), r.Expr)
				break
			}
		}
	}
	for _, id := range ids {
		f.mu.Lock()
		ch := f.children[id]
		f.mu.Unlock()
		m := ch.metrics(t)
		for _, cause := range failoverCauses {
			assert.Equal(t, 0.0, ch.metric(t, m, "tenure_partition_failovers_total", "cause", cause.String()), id)
		}
	}
	require.Positive(t, served.Load(), "work was served through the restart")
	t.Logf("%d scrapes, %d rules evaluated at each; work: %d served, %d refused (retried elsewhere by a real client), %d failed",
		len(instants), len(rules), served.Load(), refused.Load(), failed.Load())
}
