package ownership

import (
	"context"
	"fmt"
	"math"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fleet"
	"github.com/tenure-go/tenure/internal/keys"
)

// This file holds the node's load meter: it counts the work admitted per
// partition (every Hold, and so every Router.Do and HTTP request, counts 1;
// AddLoad adds custom units), smooths it into a rate with an exponentially
// weighted moving average, and publishes the rates of the partitions the
// node serves at <prefix>load/<nodeID>, bound to the node's lease, for the
// balancer and the operator.
//
// Cost: one etcd write per node per report interval, which is
// max(LoadInterval, members/LoadBudget), so that a fleet writes at most
// about LoadBudget reports per second whatever its size; a report equal to
// the last one written is not written again.

// Defaults of the load meter (see Config).
const (
	defaultLoadInterval = 10 * time.Second
	defaultLoadWindow   = time.Minute
	defaultLoadBudget   = 5.0
)

// loadMeter counts and smooths the load of every partition. counts is
// written by any goroutine; rates and last by the publisher alone.
type loadMeter struct {
	counts []atomic.Uint64 // units admitted since the last tick, by partition
	rates  []float64       // smoothed units per second, by partition
	last   string          // the report last written
}

func newLoadMeter(partitions int) *loadMeter {
	return &loadMeter{counts: make([]atomic.Uint64, partitions), rates: make([]float64, partitions)}
}

// add counts cost units of work on partition p.
func (m *loadMeter) add(p int, cost uint64) { m.counts[p].Add(cost) }

// tick folds the counts of the last elapsed time into the rates: an
// exponentially weighted moving average with time constant window, whose
// weight 1-exp(-elapsed/window) does not depend on how often it ticks. The
// rates of partitions the node does not serve are reset.
func (m *loadMeter) tick(elapsed, window time.Duration, owned []int) {
	if elapsed <= 0 {
		return
	}
	alpha := 1 - math.Exp(-elapsed.Seconds()/window.Seconds())
	serving := make(map[int]bool, len(owned))
	for _, p := range owned {
		serving[p] = true
	}
	for p := range m.counts {
		rate := float64(m.counts[p].Swap(0)) / elapsed.Seconds()
		if !serving[p] {
			m.rates[p] = 0
			continue
		}
		m.rates[p] += alpha * (rate - m.rates[p])
	}
}

// report returns the report of the partitions in owned, rates rounded to
// three significant digits so that steady load writes the same report.
func (m *loadMeter) report(window time.Duration, owned []int) keys.LoadReport {
	r := keys.LoadReport{Window: window.Seconds(), Partitions: []int{}, Loads: []float64{}}
	for _, p := range owned {
		if l := round3(m.rates[p]); l > 0 {
			r.Partitions = append(r.Partitions, p)
			r.Loads = append(r.Loads, l)
		}
	}
	return r
}

// round3 rounds x to three significant digits.
func round3(x float64) float64 {
	if x <= 0 || math.IsNaN(x) || math.IsInf(x, 0) {
		return 0
	}
	scale := math.Pow(10, 2-math.Floor(math.Log10(x)))
	return math.Round(x*scale) / scale
}

// AddLoad counts cost custom units of work (bytes, CPU time, anything the
// balancer should even out) on key's partition, on top of the one unit
// every Hold counts. It is safe for concurrent use and does not allocate.
func (n *Node) AddLoad(key string, cost uint64) {
	if p := n.snap.Load().ring.PartitionOf(key); p >= 0 {
		n.load.add(p, cost)
	}
}

// AddPartitionLoad is AddLoad for partition p. A p outside [0, P) yields
// an error wrapping fleet.ErrInvalidPartition.
func (n *Node) AddPartitionLoad(p int, cost uint64) error {
	if uint(p) >= uint(len(n.load.counts)) {
		return fmt.Errorf("%w: %d not in [0, %d)", fleet.ErrInvalidPartition, p, len(n.load.counts))
	}
	n.load.add(p, cost)
	return nil
}

// publishLoad ticks the load meter every LoadInterval and writes the
// node's report every report interval, until the node stops.
func (n *Node) publishLoad() {
	every := n.cfg.LoadInterval
	t := n.clock.NewTicker(every)
	defer t.Stop()
	prev, lastWrite := n.clock.Now(), time.Time{}
	for {
		select {
		case <-n.rootCtx.Done():
			return
		case now := <-t.Chan():
			s := n.snap.Load()
			n.load.tick(now.Sub(prev), n.cfg.LoadWindow, s.owned)
			prev = now
			interval := max(every, time.Duration(float64(len(s.members))/n.cfg.LoadBudget*float64(time.Second)))
			if now.Sub(lastWrite) < interval || s.closed || s.sessionEnded() {
				continue
			}
			val := keys.EncodeLoadReport(n.load.report(n.cfg.LoadWindow, s.owned))
			if val == n.load.last {
				continue
			}
			ctx, cancel := context.WithTimeout(n.rootCtx, every)
			_, err := n.cli.Put(ctx, n.layout.Load(n.id), val, clientv3.WithLease(s.gen.lease))
			cancel()
			if err != nil {
				n.log.Debug("publish load report", "error", err)
				continue
			}
			n.load.last, lastWrite = val, now
		}
	}
}
