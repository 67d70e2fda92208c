package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/balance"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestTenurectlAlarms runs the built tenurectl against an etcd whose small
// quota is filled (its NOSPACE alarm stands): status lists the alarm, as
// text and as JSON in the one vocabulary, and balance plan says that the
// balancer pauses; once the space is reclaimed and the alarm disarmed,
// status lists none.
func TestTenurectlAlarms(t *testing.T) {
	bin := buildCtl(t)
	cfg := cluster.DefaultConfig()
	cfg.QuotaBackendBytes = 4 << 20
	c := cluster.NewWithConfig(t, cfg)
	cli := c.NewClient(t)
	const name = "ctl-alarms"
	ncfg := ownership.DefaultConfig()
	ncfg.Cluster, ncfg.NodeID, ncfg.Addr = name, "n1", "n1:7000"
	ncfg.Ring.Partitions = 8
	ncfg.Session.TTL = 2 * time.Second
	joinNode(t, cli, ncfg)
	x := ctl{t: t, bin: bin, base: []string{"--endpoints", strings.Join(c.Endpoints(), ","), "--cluster", name, "--timeout", "10s"}}

	var st fleet.Status
	x.json(&st, "status")
	require.Empty(t, st.Alarms)
	require.NotNil(t, st.Alarms)
	assert.Contains(t, x.ok("status"), "etcd alarms:  -")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := cluster.Fill(ctx, cli)
	require.NoError(t, err)

	seen := map[string]bool{}
	out := x.ok("status", "--json")
	require.NoError(t, checkVocabulary(out, seen), out)
	assert.True(t, seen["alarm"] && seen["etcd_member"], out)
	x.json(&st, "status")
	require.Len(t, st.Alarms, 1)
	assert.Equal(t, "NOSPACE", st.Alarms[0].Alarm)
	assert.NotEmpty(t, st.Alarms[0].Member)
	assert.Contains(t, x.ok("status"), "etcd alarms:  NOSPACE (etcd member "+st.Alarms[0].Member+"): etcd refuses puts; planned moves, operator actions and the balancer wait until it is disarmed")

	var pl balance.Planned
	x.json(&pl, "balance", "plan")
	require.Len(t, pl.Alarms, 1)
	assert.Equal(t, "NOSPACE", pl.Alarms[0].Alarm)
	assert.Contains(t, x.ok("balance", "plan"), "the balancer pauses: the next pass writes nothing")

	require.NoError(t, c.ReclaimSpace(ctx, cli))
	x.json(&st, "status")
	require.Empty(t, st.Alarms)
}
