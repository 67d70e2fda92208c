package fleet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/balance"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/cluster"
)

// stepSink cancels a context at the first "migration step" log line: the
// driver of a migration that stops between two steps.
type stepSink struct {
	once   sync.Once
	cancel context.CancelFunc
}

func (s *stepSink) Accept(_ string, _ hclog.Level, msg string, _ ...any) {
	if msg == "migration step" {
		s.once.Do(s.cancel)
	}
}

// A ring-algorithm migration of a fleet of three nodes: refused, naming
// the member, while a member of an older build (one that publishes no
// features) is live; a dry run reports moves and steps; a driver stopped
// after its first step leaves the migration recorded, the balancer paused
// and the status reporting it; an abort deletes it and its placements;
// running it again completes it, keeping an operator's pin, and every
// node computes the new ring.
func TestMigrateAlgorithm(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	const P, name = 64, "migrate"
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	l := keys.New(name)
	require.NoError(t, createSpec(ctx, cli, l, ring.Spec{Partitions: P, LoadFactor: 1.25, RingAlgorithm: ring.AlgorithmBounded}))
	var nodes []*ownership.Node
	for i := range 3 {
		nodes = append(nodes, join(t, cli, testConfig(t, name, "n"+strconv.Itoa(i), P)))
	}
	waitStable(t, 30*time.Second, nodes...)
	op, err := fleet.NewOperator(cli, fleet.OperatorConfig{Cluster: name})
	require.NoError(t, err)
	who := fleet.Action{Actor: "test", Reason: "to the weighted ring"}
	to := fleet.Migration{Target: ring.AlgorithmWeighted, Budget: 4}

	// A member of an older build.
	lease, err := cli.Grant(ctx, 30)
	require.NoError(t, err)
	_, err = cli.Put(ctx, l.Member("old"), `{"id":"old","addr":"old:1"}`, clientv3.WithLease(lease.ID))
	require.NoError(t, err)
	_, err = op.MigrateAlgorithm(ctx, to, who)
	require.ErrorIs(t, err, ring.ErrFeatureUnsupported)
	assert.Contains(t, err.Error(), "member(s) old (")
	_, err = cli.Revoke(ctx, lease.ID)
	require.NoError(t, err)
	waitStable(t, 30*time.Second, nodes...)

	dry, err := op.MigrateAlgorithm(ctx, fleet.Migration{Target: ring.AlgorithmWeighted, Budget: 4, DryRun: true}, who)
	require.NoError(t, err)
	require.Positive(t, dry.Moves)
	assert.Equal(t, (dry.Moves+3)/4, dry.Steps)
	assert.Equal(t, ring.AlgorithmBounded, dry.From)

	// A pin on a node that neither ring gives the partition.
	pinned, pinNode := 5, ""
	wr, err := ring.NewWeighted([]ring.Member{{ID: "n0"}, {ID: "n1"}, {ID: "n2"}}, ring.Config{Partitions: P, LoadFactor: 1.25, Algorithm: ring.AlgorithmWeighted})
	require.NoError(t, err)
	wOwner, _ := wr.Owner(pinned)
	bOwner, _ := nodes[0].Ring().Owner(pinned)
	for _, id := range []string{"n0", "n1", "n2"} {
		if id != wOwner && id != bOwner {
			pinNode = id
		}
	}
	if pinNode == "" {
		pinNode = wOwner
	}
	_, err = op.Pin(ctx, pinned, pinNode, fleet.Action{Actor: "test", Reason: "keep"})
	require.NoError(t, err)
	waitStable(t, 30*time.Second, nodes...)

	// A driver stopped after its first step.
	sctx, stop := context.WithCancel(ctx)
	sink := &stepSink{cancel: stop}
	logger := hclog.NewInterceptLogger(&hclog.LoggerOptions{Output: hclog.DefaultOutput, Level: hclog.Off})
	logger.RegisterSink(sink)
	op2, err := fleet.NewOperator(cli, fleet.OperatorConfig{Cluster: name, Logger: logger})
	require.NoError(t, err)
	_, err = op2.MigrateAlgorithm(sctx, to, who)
	require.ErrorIs(t, err, context.Canceled)
	st, err := op.Status(ctx)
	require.NoError(t, err)
	require.NotNil(t, st.Migration, "the migration stays recorded")
	assert.Equal(t, ring.AlgorithmWeighted, st.Migration.Target)
	assert.Positive(t, st.Migration.Placed+st.Migration.Moves)
	b, err := balance.NewBalancer(cli, balance.Config{Cluster: name})
	require.NoError(t, err)
	pl, err := b.Plan(ctx)
	require.NoError(t, err)
	require.NotNil(t, pl.Suspended, "the balancer pauses while a migration runs")

	ab, err := op.MigrateAlgorithm(ctx, fleet.Migration{Abort: true}, who)
	require.NoError(t, err)
	assert.True(t, ab.Done)
	st, err = op.Status(ctx)
	require.NoError(t, err)
	assert.Nil(t, st.Migration)
	assert.Equal(t, ring.AlgorithmBounded, st.Spec.RingAlgorithm)
	waitStable(t, 30*time.Second, nodes...)

	var logs testsupport.Buffer
	op3, err := fleet.NewOperator(cli, fleet.OperatorConfig{Cluster: name,
		Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info, JSONFormat: true})})
	require.NoError(t, err)
	done, err := op3.MigrateAlgorithm(ctx, to, who)
	require.NoError(t, err)
	require.True(t, done.Done)
	requireFlipLogged(ctx, t, cli, l, logs.Bytes())
	for _, n := range nodes {
		require.NoError(t, waitFor(30*time.Second, func() error {
			if a := n.Ring().Algorithm(); a != ring.AlgorithmWeighted {
				return fmt.Errorf("%s computes the %v ring", n.ID(), a)
			}
			return nil
		}, n))
	}
	waitStable(t, 30*time.Second, nodes...)
	parts, err := op.Partitions(ctx)
	require.NoError(t, err)
	for _, ps := range parts {
		if ps.Partition == pinned {
			assert.Equal(t, pinNode, ps.Owner, "the pin is kept")
			resp, err := cli.Get(ctx, l.Placement(pinned))
			require.NoError(t, err)
			require.Len(t, resp.Kvs, 1)
			pl, err := keys.DecodePlacement(resp.Kvs[0].Value)
			require.NoError(t, err)
			assert.Equal(t, keys.OriginPin, pl.Origin)
			continue
		}
		assert.Empty(t, ps.Placed, "partition %d", ps.Partition)
	}
	st, err = op.Status(ctx)
	require.NoError(t, err)
	assert.Contains(t, st.Requires, "algorithm_migration")
	assert.Contains(t, st.Requires, "weighted_ring")
	recs, err := op.Audit(ctx, time.Time{})
	require.NoError(t, err)
	seen := map[string]int{}
	for _, r := range recs {
		seen[r.Action]++
	}
	for _, a := range []string{"algorithm-migrate", "algorithm-step", "algorithm-abort", "algorithm-flip"} {
		assert.Positive(t, seen[a], "audited: %s", a)
	}
}

// requireFlipLogged requires one "migration flipped" line among the
// driver's log lines (hclog JSON), from bounded to weighted, at the
// revision that wrote the spec's algorithm: the spec there records
// weighted, and the one before it bounded.
func requireFlipLogged(ctx context.Context, t *testing.T, cli *clientv3.Client, l keys.Layout, log []byte) {
	t.Helper()
	var flips []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(log), []byte("\n")) {
		var m map[string]any
		require.NoError(t, json.Unmarshal(line, &m), "%s", line)
		if m["@message"] == "migration flipped" {
			flips = append(flips, m)
		}
	}
	require.Len(t, flips, 1, "one flip logged:\n%s", log)
	f := flips[0]
	assert.Equal(t, "bounded", f["from"])
	assert.Equal(t, "weighted", f["to"])
	rev, ok := f["revision"].(float64)
	require.True(t, ok, "the flip's revision: %v", f["revision"])
	specAt := func(rev int64) (fleetview.Spec, int64) {
		resp, err := cli.Get(ctx, l.Spec(), clientv3.WithRev(rev))
		require.NoError(t, err)
		require.Len(t, resp.Kvs, 1)
		spec, err := fleetview.DecodeStored(resp.Kvs[0].Value, resp.Kvs[0].ModRevision)
		require.NoError(t, err)
		return spec, resp.Kvs[0].ModRevision
	}
	after, modRev := specAt(int64(rev))
	assert.Equal(t, int64(rev), modRev, "the flip wrote the spec at the revision it logged")
	assert.Equal(t, ring.AlgorithmWeighted, after.RingAlgorithm)
	before, _ := specAt(int64(rev) - 1)
	assert.Equal(t, ring.AlgorithmBounded, before.RingAlgorithm)
}
