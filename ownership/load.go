package ownership

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/etcderr"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/internal/loadmeter"
	"github.com/tenure-go/tenure/ownership/fleet"
)

// This file holds the node's load meter: it counts the work admitted per
// partition (every Hold, and so every Router.Do and HTTP request, counts 1;
// AddLoad adds custom units), smooths it into a rate with an exponentially
// weighted moving average over the time the node has served the partition
// (internal/loadmeter), and publishes the rates of the partitions the node
// serves at <prefix>load/<nodeID>, bound to the node's lease, for the
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

// loadMeter is the node's meter (internal/loadmeter: a partition the node
// starts serving takes its first full tick's rate, see the package doc)
// and the report the publisher last wrote, which only the publisher
// touches.
type loadMeter struct {
	*loadmeter.Meter
	last string
}

func newLoadMeter(partitions int) *loadMeter {
	return &loadMeter{Meter: loadmeter.New(partitions)}
}

// add counts cost units of work on partition p (Hold counts 1).
func (m *loadMeter) add(p int, cost uint64) { m.Add(p, cost) }

// AddLoad counts cost custom units of work (bytes, CPU time, anything the
// balancer should even out) on key's partition, on top of the one unit
// every Hold counts. It is safe for concurrent use and does not allocate.
func (n *Node) AddLoad(key string, cost uint64) {
	if p := n.snap.Load().shape.Of(key); p >= 0 {
		n.load.Add(p, cost)
	}
}

// AddPartitionLoad is AddLoad for partition p. A p outside [0, P) yields
// an error wrapping fleet.ErrInvalidPartition.
func (n *Node) AddPartitionLoad(p int, cost uint64) error {
	if uint(p) >= uint(n.load.Partitions()) {
		return fmt.Errorf("%w: %d not in [0, %d)", fleet.ErrInvalidPartition, p, n.load.Partitions())
	}
	n.load.Add(p, cost)
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
			n.load.Tick(now.Sub(prev), n.cfg.LoadWindow, s.owned)
			prev = now
			interval := max(every, time.Duration(float64(len(s.members))/n.cfg.LoadBudget*float64(time.Second)))
			if now.Sub(lastWrite) < interval || s.closed || s.sessionEnded() {
				continue
			}
			val := keys.EncodeLoadReport(n.load.Report(n.cfg.LoadWindow, s.owned))
			if val == n.load.last {
				continue
			}
			ctx, cancel := context.WithTimeout(n.rootCtx, every)
			_, err := n.cli.Put(ctx, n.layout.Load(n.id), val, clientv3.WithLease(s.gen.lease))
			cancel()
			if err == nil || etcderr.NoSpace(err) {
				n.post(s.gen, loadWritten{err: err}) // for tenure_etcd_alarm (nospace.go)
			}
			if err != nil {
				n.log.Debug("publish load report", "error", err)
				continue
			}
			n.load.last, lastWrite = val, now
		}
	}
}
