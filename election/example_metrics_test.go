package election_test

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/sim/cluster"
)

// Register a node's session metrics and an election's with their configs;
// read the leader gauge; proclaim a new value; Close unregisters the
// election's.
func ExampleSessionConfig_metrics() {
	ctx := context.Background()
	etcd, err := cluster.Start(ctx, cluster.DefaultConfig()) // an embedded etcd, for the example
	if err != nil {
		fmt.Println(err)
		return
	}
	defer etcd.Close()
	cli, err := etcd.Client()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cli.Close()

	reg := prometheus.NewRegistry() // the application's registry, served on /metrics
	// Every session the node opens with reg shares the session metrics.
	session, err := election.NewSession(ctx, cli, election.SessionConfig{TTL: 5 * time.Second, Metrics: reg})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer session.Close(ctx)

	e, err := election.NewElection(session, cli, cli, election.ElectionConfig{
		Cluster: "demo", Name: "billing", ID: "node-1", Value: "10.0.0.1:8080", Metrics: reg,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer e.Close(ctx)
	term, err := e.Campaign(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	if err := term.Proclaim(ctx, "10.0.0.1:8080 caught-up"); err != nil {
		fmt.Println(err)
		return
	}
	leader, err := e.Leader(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	st := e.Status()
	fmt.Println("leader:", st.Leader, "epoch matches:", st.Epoch == term.Token().Epoch, "value:", leader.Value)
	fmt.Println("series:", testutil.CollectAndCount(reg, "tenure_election_is_leader", "tenure_session_opened_total"))
	// Output:
	// leader: true epoch matches: true value: 10.0.0.1:8080 caught-up
	// series: 2
}
