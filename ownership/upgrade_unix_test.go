//go:build unix

package ownership

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/cluster"
)

// A rolling upgrade of three nodes, each in its own process, from a build
// that lacks placements (it understands the weighted ring only) to this
// build, under keyed load: each request is sent to its key's owner as an
// Observer sees it and, when refused or cut off by a move, sent again to
// the owner the Observer names next, as router.Client does; none fails.
// Until the last older process is gone, a pin (which needs placements) is
// refused naming the older members; after it, the pin is taken.
func TestRollingUpgradeFailsNothing(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	const P, name = 32, "upgrade"
	ids := []string{"n1", "n2", "n3"}
	ringCfg := testConfig(t, name, "n1", P).Ring
	f := &rollingFleet{children: map[string]*child{}, gen: map[string]int{}}
	for _, id := range ids {
		f.set(id, startChildBuild(t, c.Endpoints(), name, id, P, fleetview.FeatureWeightedRing))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	o, err := fleet.Observe(ctx, cli, fleet.ObserverConfig{Cluster: name, Ring: ringCfg})
	require.NoError(t, err)
	defer o.Close()
	waitObserver(t, o, func() error { return f.servedBy(o, ringCfg, ids...) })
	op, err := fleet.NewOperator(cli, fleet.OperatorConfig{Cluster: name})
	require.NoError(t, err)

	lctx, stopLoad := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var served, retried, failed atomic.Int64
	var mu sync.Mutex
	var failures []string
	client := &http.Client{Timeout: 5 * time.Second}
	for w := range 4 {
		wg.Go(func() {
			for i := 0; lctx.Err() == nil; i++ {
				key := fmt.Sprintf("key-%d-%d", w, i%200)
				if err := sendUntilServed(lctx, client, o, key, &retried); err != nil && lctx.Err() == nil {
					failed.Add(1)
					mu.Lock()
					failures = append(failures, err.Error())
					mu.Unlock()
				} else if err == nil {
					served.Add(1)
				}
			}
		})
	}

	who := fleet.Action{Actor: "test", Reason: "after the upgrade"}
	for i, id := range ids {
		_, err := op.Pin(ctx, 0, "n1", who)
		require.ErrorIs(t, err, ring.ErrFeatureUnsupported, "a pin before %s is upgraded", id)
		assert.Contains(t, err.Error(), fmt.Sprintf("%q is not understood by member(s) %s (", fleetview.FeaturePlacements, strings.Join(ids[i:], ", ")),
			"the members of the older build")

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
	for next := served.Load() + 500; served.Load() < next && ctx.Err() == nil; {
		time.Sleep(10 * time.Millisecond) // let the load run past the last restart
	}
	stopLoad()
	wg.Wait()

	st, err := op.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, fleetview.Features(), st.Features, "every member runs this build")
	_, err = op.Pin(ctx, 0, "n1", who)
	require.NoError(t, err)
	assert.Zero(t, failed.Load(), "requests that failed: %v", failures)
	require.Positive(t, served.Load())
	t.Logf("rolling upgrade of %d processes: %d requests served, %d attempts sent again to the next owner, %d failed",
		len(ids), served.Load(), retried.Load(), failed.Load())
}

// sendUntilServed sends key's work to its owner as o names it, and again
// to the owner o names next while it is refused (409: not the owner, a
// handoff) or its owner is unreachable (a process that left), for at most
// 10s; it returns nil once the work was served, or the last refusal.
func sendUntilServed(ctx context.Context, client *http.Client, o *fleet.Observer, key string, retried *atomic.Int64) error {
	deadline := time.Now().Add(10 * time.Second)
	last := errors.New("no owner known")
	for attempt := 0; time.Now().Before(deadline); attempt++ {
		if attempt > 0 {
			retried.Add(1)
			select {
			case <-o.Changed():
			case <-time.After(20 * time.Millisecond):
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		r := o.Lookup(key)
		if r.Addr == "" {
			continue
		}
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+r.Addr+"/work?key="+key, http.NoBody)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			last = err
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return nil
		}
		last = fmt.Errorf("%s: %s from %s", key, resp.Status, r.Owner)
	}
	return last
}
