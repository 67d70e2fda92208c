package simulation

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/balance"
	"github.com/tenure-go/tenure/sim/memetcd"
)

// Load meter and balancer settings of the runs with a balancer, scaled to
// a run of seconds of virtual time: the nodes publish their load every
// second, smoothed over 3 seconds, and the balancer passes every 2 seconds
// with a 4-second cooldown, moving up to 2 of the 16 partitions a pass.
const (
	simLoadInterval = time.Second
	simLoadWindow   = 3 * time.Second
	simBalanceEvery = 2 * time.Second
	simCooldown     = 4 * time.Second
	simBudget       = 0.125
)

// balancerOn reports whether the run of seed has a balancer: one tenure
// seed in three.
func balancerOn(seed uint64) bool { return seed%3 == 0 }

// simBalancer is the real balance.Balancer running in the simulated
// world, elected through tenure's election on a client of its own (a
// process apart from the nodes) and writing its moves in the simulated
// etcd; every node folds them into its ring, so each is a planned move
// under the checkers' eyes.
type simBalancer struct {
	cli    *memetcd.Client
	sess   *election.Session
	cancel context.CancelFunc
	done   sync.WaitGroup
}

// startBalancer campaigns and runs passes until stop.
func startBalancer(ctx context.Context, w *world) (*simBalancer, error) {
	sb := &simBalancer{cli: w.srv.NewClient()}
	sess, err := election.NewSession(ctx, sb.cli, election.SessionConfig{TTL: w.cfg.TTL, Clock: w.fc})
	if err != nil {
		_ = sb.cli.Close()
		return nil, err
	}
	sb.sess = sess
	e, err := election.NewElection(sess, sb.cli, sb.cli, election.ElectionConfig{Cluster: cluster, Name: "balancer"})
	if err != nil {
		sb.close()
		return nil, err
	}
	b, err := balance.NewBalancer(sb.cli, balance.Config{Cluster: cluster, Clock: w.fc,
		Interval: simBalanceEvery, Cooldown: simCooldown, Budget: simBudget})
	if err != nil {
		sb.close()
		return nil, err
	}
	rctx, cancel := context.WithCancel(ctx)
	sb.cancel = cancel
	sb.done.Go(func() { _ = b.Run(rctx, e) })
	return sb, nil
}

// countMove counts a committed placement if a balancer wrote it.
func countMove(n *atomic.Int64, key string, value []byte) {
	if _, ok := keys.New(cluster).PlacementPartition(key); !ok {
		return
	}
	if pl, err := keys.DecodePlacement(value); err == nil && pl.Origin == keys.OriginBalance {
		n.Add(1)
	}
}

// close stops the balancer and ends its session.
func (sb *simBalancer) close() {
	if sb.cancel != nil {
		sb.cancel()
	}
	sb.done.Wait()
	if sb.sess != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = sb.sess.Close(ctx)
		cancel()
	}
	_ = sb.cli.Close()
}
