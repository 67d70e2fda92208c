package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/cluster"
)

// tenurectl, built, migrates a live fleet of three nodes from the
// count-only ring to the weighted one: a dry run first, then the
// migration, after which every node computes the weighted ring and the
// fleet is settled; members show each build and its features, and the
// spec the features in use.
func TestTenurectlSpecAlgorithm(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	bin := buildCtl(t)
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	const name, parts = "algo", 32
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := cli.Put(ctx, keys.New(name).Spec(), fmt.Sprintf(`{"partitions":%d,"load_factor":1.25,"ring_algorithm":1}`, parts))
	require.NoError(t, err)
	var nodes []*ownership.Node
	for _, id := range []string{"n1", "n2", "n3"} {
		cfg := ownership.DefaultConfig()
		cfg.Cluster, cfg.NodeID, cfg.Addr = name, id, id+":7000"
		cfg.Ring.Partitions = parts
		cfg.Session.TTL = 2 * time.Second
		nodes = append(nodes, joinNode(t, cli, cfg))
	}
	waitNodes(t, nodes, settled(nodes, ""))
	x := ctl{t: t, bin: bin, base: []string{"--endpoints", strings.Join(c.Endpoints(), ","), "--cluster", name, "--timeout", "30s"}}

	var members []fleet.MemberStatus
	x.json(&members, "members")
	require.Len(t, members, 3)
	for _, m := range members {
		assert.NotEmpty(t, m.Build, m.ID)
		assert.Contains(t, m.Features, "algorithm_migration", m.ID)
	}
	assert.Contains(t, x.ok("members"), "algorithm_migration")

	var dry fleet.Migration
	x.json(&dry, "spec", "algorithm", "weighted", "--budget", "4", "--dry-run")
	require.Positive(t, dry.Moves)
	assert.Equal(t, (dry.Moves+3)/4, dry.Steps)
	assert.Equal(t, ring.AlgorithmBounded, dry.From)
	assert.Contains(t, x.ok("spec", "algorithm", "weighted", "--budget", "4", "--dry-run"), "steps:")

	r := x.run("spec", "algorithm", "weighted")
	assert.Equal(t, 2, r.code, "a migration needs a reason: %s", r.err)
	r = x.run("spec", "algorithm", "round-robin", "--reason", "x")
	assert.Equal(t, 2, r.code, "an unknown algorithm: %s", r.err)

	out := x.ok("spec", "algorithm", "weighted", "--budget", "4", "--reason", "weights")
	assert.Contains(t, out, "ring algorithm:  weighted")
	waitNodes(t, nodes, func() error {
		for _, n := range nodes {
			if a := n.Ring().Algorithm(); a != ring.AlgorithmWeighted {
				return fmt.Errorf("%s computes the %v ring", n.ID(), a)
			}
		}
		return settled(nodes, "")()
	})
	var spec struct {
		ring.Spec
		Requires []string `json:"requires"`
	}
	x.json(&spec, "spec")
	assert.Equal(t, ring.AlgorithmWeighted, spec.RingAlgorithm)
	assert.Contains(t, spec.Requires, "weighted_ring")
	assert.Contains(t, x.ok("spec", "algorithm", "status"), "none running")
	var recs []fleet.AuditRecord
	x.json(&recs, "audit")
	var actions []string
	for _, rec := range recs {
		actions = append(actions, rec.Action)
	}
	assert.Contains(t, actions, "algorithm-flip")
	assert.Contains(t, actions, "algorithm-step")
	r = x.run("spec", "algorithm", "abort", "--reason", "nothing runs")
	assert.Equal(t, 1, r.code, "abort with no migration: %s", r.err)
}
