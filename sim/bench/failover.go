package bench

import (
	"context"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/ownership"
)

// failoverTTL is the lease TTL of every measured failover: tenure's
// smallest (election.MinTTL).
const failoverTTL = 2 * time.Second

// client-go's leaderelection defaults (k8s.io/client-go/tools/leaderelection,
// as kube-controller-manager and kube-scheduler set them).
const (
	clientGoLeaseDuration = 15 * time.Second
	clientGoRenewDeadline = 10 * time.Second
	clientGoRetryPeriod   = 2 * time.Second
)

// candidate of an election, in either implementation.
type elector interface {
	campaign(ctx context.Context) error
	resign(ctx context.Context) error
	prefix() string
	crashed()
	close()
}

type tenureElector struct {
	s    *election.Session
	e    *election.Election
	term *election.Term
}

func newTenureElector(ctx context.Context, cli *clientv3.Client, name string) (elector, error) {
	s, err := election.NewSession(ctx, cli, election.SessionConfig{TTL: failoverTTL})
	if err != nil {
		return nil, err
	}
	e, err := election.NewElection(s, cli, cli, election.ElectionConfig{Cluster: "bench", Name: name})
	if err != nil {
		_ = s.Close(ctx)
		return nil, err
	}
	return &tenureElector{s: s, e: e}, nil
}

func (c *tenureElector) campaign(ctx context.Context) (err error) {
	c.term, err = c.e.Campaign(ctx)
	return err
}
func (c *tenureElector) resign(ctx context.Context) error { return c.term.Resign(ctx) }
func (c *tenureElector) prefix() string                   { return c.e.Prefix() }
func (c *tenureElector) crashed() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the client is closed: nothing to revoke
	_ = c.s.Close(ctx)
}
func (c *tenureElector) close() { _ = c.s.Close(context.Background()) }

type etcdElector struct {
	s *concurrency.Session
	e *concurrency.Election
}

func newEtcdElector(_ context.Context, cli *clientv3.Client, name string) (elector, error) {
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(failoverTTL/time.Second)))
	if err != nil {
		return nil, err
	}
	return &etcdElector{s: s, e: concurrency.NewElection(s, "/bench-concurrency/"+name)}, nil
}

func (c *etcdElector) campaign(ctx context.Context) error { return c.e.Campaign(ctx, "v") }
func (c *etcdElector) resign(ctx context.Context) error   { return c.e.Resign(ctx) }
func (c *etcdElector) prefix() string                     { return c.e.Key()[:len(c.e.Key())-16] }
func (c *etcdElector) crashed()                           { c.s.Orphan() }
func (c *etcdElector) close()                             { _ = c.s.Close() }

type newElector func(ctx context.Context, cli *clientv3.Client, name string) (elector, error)

// takeover measures one end (crash or resign) of a leader: the time from
// the end until the waiting follower is elected.
func takeover(ctx context.Context, e *env, newEl newElector, crash bool) (time.Duration, error) {
	c, err := e.etcd(ctx, 3)
	if err != nil {
		return 0, err
	}
	cli1, err := c.Client()
	if err != nil {
		return 0, err
	}
	defer cli1.Close()
	cli2, err := c.Client()
	if err != nil {
		return 0, err
	}
	defer cli2.Close()
	name := e.name("takeover")
	leader, err := newEl(ctx, cli1, name)
	if err != nil {
		return 0, err
	}
	follower, err := newEl(ctx, cli2, name)
	if err != nil {
		return 0, err
	}
	defer follower.close()
	if err := leader.campaign(ctx); err != nil {
		return 0, err
	}
	won := make(chan error, 1)
	go func() { won <- follower.campaign(ctx) }()
	for { // until the follower's candidacy is in etcd
		resp, err := cli2.Get(ctx, leader.prefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return 0, err
		}
		if resp.Count == 2 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	start := time.Now()
	if crash {
		err = cli1.Close()
	} else {
		err = leader.resign(ctx)
	}
	if err != nil {
		return 0, err
	}
	if err := <-won; err != nil {
		return 0, err
	}
	took := time.Since(start)
	_ = follower.resign(ctx)
	if crash {
		leader.crashed()
	} else {
		leader.close()
	}
	return took, nil
}

func runFailover(ctx context.Context, e *env) ([]Section, error) {
	cfg := e.cfg
	rounds := cfg.failoverRounds()
	const parts = 1024
	// The ownership fleet: 3 nodes that stay, on a 3-member etcd; each
	// sample joins a fourth and ends it.
	cli, err := e.client(ctx, 3)
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	name := e.name("bench-failover")
	stay, err := joinFleet(ctx, cli, name, parts, failoverTTL, nil, "s0", "s1", "s2")
	if err != nil {
		return nil, err
	}
	defer closeFleet(stay)
	stayNodes := make([]*ownership.Node, len(stay))
	for i, n := range stay {
		stayNodes[i] = n.node
	}
	seq := 0
	move := func(crash bool) func(ctx context.Context) (float64, error) {
		return func(ctx context.Context) (float64, error) {
			dcli, err := e.client(ctx, 3)
			if err != nil {
				return 0, err
			}
			defer dcli.Close()
			seq++
			d, err := joinNode(ctx, dcli, name, fmt.Sprintf("d%d", seq), "", parts, failoverTTL, nil)
			if err != nil {
				return 0, err
			}
			if err := waitServing(ctx, parts, append(stayNodes[:len(stayNodes):len(stayNodes)], d.node)...); err != nil {
				d.close()
				return 0, err
			}
			start := time.Now()
			closed := make(chan struct{})
			if crash {
				_ = dcli.Close()
				close(closed)
			} else {
				go func() { d.close(); close(closed) }()
			}
			err = waitServing(ctx, parts, stayNodes...)
			took := time.Since(start)
			<-closed
			if crash {
				cctx, cancel := context.WithTimeout(ctx, time.Second)
				d.router.Close()
				_ = d.node.Close(cctx)
				cancel()
			}
			return ms(took), err
		}
	}
	elect := func(newEl newElector, crash bool) func(ctx context.Context) (float64, error) {
		return func(ctx context.Context) (float64, error) {
			d, err := takeover(ctx, e, newEl, crash)
			return ms(d), err
		}
	}
	var secs []Section
	for _, crash := range []bool{true, false} {
		ownName := fmt.Sprintf("tenure ownership: graceful leave of 1 of 4 nodes (%d partitions)", parts)
		if crash {
			ownName = fmt.Sprintf("tenure ownership: kill of 1 of 4 nodes (%d partitions)", parts)
		}
		cands := []candidate{
			{"tenure `election`", elect(newTenureElector, crash)},
			{ownName, move(crash)},
			{"etcd `concurrency.Election`", elect(newEtcdElector, crash)},
		}
		samples, err := interleave(ctx, rounds, cands)
		if err != nil {
			return nil, err
		}
		rows := rowsFrom(cands, samples, 0)
		ref := rows[0].Value
		scaledRetry := scaleClientGo(clientGoRetryPeriod)
		var cg, cgScaled time.Duration
		var cgNote, cgScaledNote string
		if crash {
			cg, cgScaled = clientGoLeaseDuration+clientGoRetryPeriod, failoverTTL+scaledRetry
			cgNote = "up to LeaseDuration + RetryPeriod (15s + 2s): followers retry every RetryPeriod and take over once the lease they last saw is LeaseDuration old"
			cgScaledNote = fmt.Sprintf("up to LeaseDuration + RetryPeriod (2s + %v)", scaledRetry.Round(time.Millisecond))
		} else {
			cg, cgScaled = clientGoRetryPeriod, scaledRetry
			cgNote = "with ReleaseOnCancel: the leader empties the lease; followers notice at their next retry, up to RetryPeriod (2s)"
			cgScaledNote = "up to RetryPeriod"
		}
		rows = append(rows,
			Row{Name: "client-go `leaderelection`, defaults (computed)", Value: ms(cg), Allocs: -1, Ratio: ratio(ms(cg), ref), Note: cgNote},
			Row{Name: "client-go `leaderelection` scaled to a 2s lease (computed)", Value: ms(cgScaled), Allocs: -1, Ratio: ratio(ms(cgScaled), ref),
				Note: fmt.Sprintf("LeaseDuration 2s, RenewDeadline %v, RetryPeriod %v (the defaults' proportions); %s", scaleClientGo(clientGoRenewDeadline), scaledRetry.Round(time.Millisecond), cgScaledNote)},
		)
		title := "Planned handoff: leader resigns or node leaves, until the successor serves"
		intro := fmt.Sprintf("3-member etcd. Election: the leader resigns. Ownership: a fourth node of 4 leaves with `Close` until the 3 others serve all %d partitions. Lease TTL 2s; %d rounds interleaved.", parts, rounds)
		if crash {
			title = "Crash failover: leader or node killed, until the successor serves"
			intro = fmt.Sprintf("3-member etcd. Election: the leader's etcd client is closed without resigning, as a crash would. Ownership: the fourth node of 4 loses its etcd client until the 3 others serve all %d partitions. Lease TTL 2s for all measured rows (tenure's default is 10s: failover about TTL plus a few hundred ms); %d rounds interleaved.", parts, rounds)
		}
		sec := Section{Key: "failover", Title: title, Intro: intro, Unit: "ms", Rows: rows}
		if crash {
			sec.Notes = append(sec.Notes, "Every measured crash failover is the lease's expiry: the TTL from the last renewal, plus up to about 500ms until etcd's lessor, which looks for expired leases every 500ms, revokes it; the successor then reacts within milliseconds. The measured rows therefore differ by where each crash falls in that window, not by implementation (see the ranges). client-go's rows are worst cases, computed, not measured.")
		}
		secs = append(secs, sec)
	}
	return secs, nil
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// scaleClientGo scales one of client-go's default periods to a lease of
// failoverTTL, keeping the defaults' proportions.
func scaleClientGo(d time.Duration) time.Duration {
	return time.Duration(float64(d) * float64(failoverTTL) / float64(clientGoLeaseDuration)).Round(time.Millisecond)
}
