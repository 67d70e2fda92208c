package election_test

// Failover and handoff times of this package side by side with etcd's
// concurrency.Election on the same embedded cluster. A crash failover waits
// for etcd to expire a 2s lease, so keep the iteration count small:
//
//	go test ./election -run '^$' -bench . -benchtime 5x -count 3
//
// ms/failover and ms/handoff are the medians of each run's iterations.

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/sim/cluster"
)

// candidate is one side of a failover, in either implementation.
type candidate interface {
	campaign(ctx context.Context) error
	resign(ctx context.Context) error
	// prefix is the election's key prefix.
	prefix() string
	// crashed releases what is left once the candidate's client was closed.
	crashed()
	close()
}

type tenureCandidate struct {
	s    *election.Session
	e    *election.Election
	term *election.Term
}

func newTenureCandidate(b *testing.B, cli *clientv3.Client, name string) candidate {
	s, err := election.NewSession(context.Background(), cli, election.SessionConfig{TTL: shortTTL})
	if err != nil {
		b.Fatal(err)
	}
	e, err := election.NewElection(s, cli, cli, election.ElectionConfig{Cluster: "bench", Name: name})
	if err != nil {
		b.Fatal(err)
	}
	return &tenureCandidate{s: s, e: e}
}

func (c *tenureCandidate) campaign(ctx context.Context) (err error) {
	c.term, err = c.e.Campaign(ctx)
	return err
}
func (c *tenureCandidate) resign(ctx context.Context) error { return c.term.Resign(ctx) }
func (c *tenureCandidate) prefix() string                   { return c.e.Prefix() }
func (c *tenureCandidate) crashed() {
	ctx, cancel := context.WithCancel(context.Background())
	cancel() // the client is closed: nothing to revoke
	_ = c.s.Close(ctx)
}
func (c *tenureCandidate) close() { _ = c.s.Close(context.Background()) }

type etcdCandidate struct {
	s *concurrency.Session
	e *concurrency.Election
}

func newEtcdCandidate(b *testing.B, cli *clientv3.Client, name string) candidate {
	s, err := concurrency.NewSession(cli, concurrency.WithTTL(int(shortTTL/time.Second)))
	if err != nil {
		b.Fatal(err)
	}
	return &etcdCandidate{s: s, e: concurrency.NewElection(s, "/bench-concurrency/"+name)}
}

func (c *etcdCandidate) campaign(ctx context.Context) error { return c.e.Campaign(ctx, "v") }
func (c *etcdCandidate) resign(ctx context.Context) error   { return c.e.Resign(ctx) }
func (c *etcdCandidate) prefix() string                     { return c.e.Key()[:len(c.e.Key())-16] }
func (c *etcdCandidate) crashed()                           { c.s.Orphan() }
func (c *etcdCandidate) close()                             { _ = c.s.Close() }

type newCandidate func(b *testing.B, cli *clientv3.Client, name string) candidate

var implementations = []struct {
	name string
	new  newCandidate
}{
	{"tenure", newTenureCandidate},
	{"concurrency", newEtcdCandidate},
}

// benchTakeover measures, per iteration, the time from end (crash or
// resign) of a leader to the election of the waiting follower.
// after cleans up the leader once the follower has won.
func benchTakeover(b *testing.B, c *cluster.Cluster, newCand newCandidate, unit string,
	end func(leaderCli *clientv3.Client, leader candidate) error, after func(leader candidate)) {
	ctx := context.Background()
	var times []time.Duration
	for i := range b.N {
		b.StopTimer()
		cli1, err := c.Client()
		if err != nil {
			b.Fatal(err)
		}
		cli2, err := c.Client()
		if err != nil {
			b.Fatal(err)
		}
		name := fmt.Sprintf("%s-%d-%d", unit, b.N, i)
		leader, follower := newCand(b, cli1, name), newCand(b, cli2, name)
		if err := leader.campaign(ctx); err != nil {
			b.Fatal(err)
		}
		won := make(chan error, 1)
		go func() { won <- follower.campaign(ctx) }()
		// Wait until the follower's candidacy is in etcd.
		for {
			resp, err := cli1.Get(ctx, leader.prefix(), clientv3.WithPrefix(), clientv3.WithCountOnly())
			if err != nil {
				b.Fatal(err)
			}
			if resp.Count == 2 {
				break
			}
			time.Sleep(time.Millisecond)
		}

		b.StartTimer()
		start := time.Now()
		if err := end(cli1, leader); err != nil {
			b.Fatal(err)
		}
		if err := <-won; err != nil {
			b.Fatal(err)
		}
		took := time.Since(start)
		b.StopTimer()
		times = append(times, took)
		if err := follower.resign(ctx); err != nil {
			b.Fatal(err)
		}
		follower.close()
		after(leader)
		_ = cli2.Close()
		_ = cli1.Close()
	}
	slices.Sort(times)
	b.ReportMetric(float64(times[len(times)/2])/float64(time.Millisecond), "ms/"+unit)
}

// BenchmarkCrashFailover: the leader's client is closed without resigning
// (TTL 2s); the time until the follower is elected.
func BenchmarkCrashFailover(b *testing.B) {
	c := cluster.New(b, 1)
	for _, impl := range implementations {
		b.Run(impl.name, func(b *testing.B) {
			benchTakeover(b, c, impl.new, "failover",
				func(cli *clientv3.Client, _ candidate) error { return cli.Close() },
				candidate.crashed)
		})
	}
}

// BenchmarkGracefulHandoff: the leader resigns; the time until the follower
// is elected.
func BenchmarkGracefulHandoff(b *testing.B) {
	c := cluster.New(b, 1)
	for _, impl := range implementations {
		b.Run(impl.name, func(b *testing.B) {
			benchTakeover(b, c, impl.new, "handoff",
				func(_ *clientv3.Client, leader candidate) error { return leader.resign(context.Background()) },
				candidate.close)
		})
	}
}
