package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestTenurectlResize builds tenurectl and resizes a live fleet of two
// nodes with it. Partition 1 is first held by a claim of a lease that no
// node holds (a holder that never hands off), so that its group cannot
// move: the dry run reports the resize's size and writes nothing; a
// resize of one group at a time stopped by --timeout exits 1, says how to
// resume, and leaves the resize in etcd, where group 0 completes without
// it (status shows it); a resize to another count is refused meanwhile;
// abort moves group 0 back and ends the resize. Then, the ghost gone,
// 8 -> 32 and 32 -> 8 complete, the nodes follow the spec, owner-of names
// the owner the nodes name, and the audit listing shows every action.
func TestTenurectlResize(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts etcd")
	}
	bin := buildCtl(t)
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const name, parts = "ctl-resize", 8
	l := keys.New(name)

	ghost, err := cli.Grant(ctx, 60)
	require.NoError(t, err)
	_, err = cli.Put(ctx, l.Claim(1), keys.EncodeClaim("ghost", time.Now()), clientv3.WithLease(ghost.ID))
	require.NoError(t, err)

	store, err := etcdfence.New(cli, etcdfence.Config{Cluster: name})
	require.NoError(t, err)
	var nodes []*ownership.Node
	for _, id := range []string{"n1", "n2"} {
		cfg := ownership.DefaultConfig()
		cfg.Cluster, cfg.NodeID, cfg.Addr = name, id, id+":7000"
		cfg.Ring.Partitions = parts
		cfg.Session.TTL = 2 * time.Second
		cfg.Fencers = []fence.Fencer{store}
		nodes = append(nodes, joinNode(t, cli, cfg))
	}
	waitNodes(t, nodes, func() error {
		if n := len(nodes[0].Owned()) + len(nodes[1].Owned()); n != parts-1 {
			return fmt.Errorf("the nodes serve %d partitions", n)
		}
		return nil
	})

	x := ctl{t: t, bin: bin, base: []string{"--endpoints", strings.Join(c.Endpoints(), ","), "--cluster", name, "--timeout", "10s"}}
	status := func() resizeState {
		var st resizeState // fresh: decoding leaves out what the output leaves out
		x.json(&st, "spec", "resize", "status")
		return st
	}
	st := status()
	assert.Equal(t, resizeState{Revision: st.Revision, Partitions: parts}, st)
	assert.Contains(t, x.ok("spec", "resize", "status"), "none in progress")

	// Bad usage: exit 2 before connecting.
	for _, args := range [][]string{
		{"spec", "resize", "--reason", "r"},
		{"spec", "resize", "--partitions", "32"},
		{"spec", "resize", "--partitions", "32", "--reason", "r", "--budget", "-1"},
		{"spec", "resize", "abort"},
		{"spec", "resize", "status", "extra"},
	} {
		r := x.run(args...)
		assert.Equal(t, 2, r.code, "%v: %s", args, r.err)
	}
	// Refused by the operator: exit 1, the error says why.
	r := x.run("spec", "resize", "--partitions", "24", "--reason", "r")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.err, "power of two")
	r = x.run("spec", "resize", "abort", "--reason", "r")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.err, "no resize in progress")

	// The dry run: 8 groups, 8 + 32 partition moves, in 8 steps of 1.
	var res resizeResult
	x.json(&res, "spec", "resize", "--partitions", "32", "--budget", "1", "--reason", "plan", "--dry-run")
	assert.Equal(t, resizeResult{From: parts, To: 32, Budget: 1, Groups: 8, PartitionMoves: 40, Steps: 8, Partitions: parts, DryRun: true}, res)
	text := x.ok("spec", "resize", "--partitions", "32", "--budget", "3", "--reason", "plan", "--dry-run")
	assert.Regexp(t, `partition moves:\s+40 `, text)
	assert.Regexp(t, `steps:\s+3 `, text)
	st = status()
	assert.False(t, st.InProgress, "a dry run writes nothing")

	// Stopped by --timeout: group 0 moves, group 1 waits for the ghost's
	// claim.
	op, err := fleet.NewOperator(cli, fleet.OperatorConfig{Cluster: name})
	require.NoError(t, err)
	short := ctl{t: t, bin: bin, base: []string{"--endpoints", strings.Join(c.Endpoints(), ","), "--cluster", name, "--timeout", "3s"}}
	r = short.run("spec", "resize", "--partitions", "32", "--budget", "1", "--reason", "grow", "--actor", "alice@ops")
	assert.Equal(t, 1, r.code, r.err)
	assert.Contains(t, r.err, "resize: started", "each step is logged on stderr")
	assert.Contains(t, r.err, "resize: groups asked to move")
	assert.Regexp(t, `did not complete within 3s \(--timeout\): \d of 8 groups done, \d moving, \d fenced; `, r.err)
	assert.Contains(t, r.err, "run it again (with a longer --timeout) to resume: tenurectl spec resize --partitions 32 --reason R")
	assert.Regexp(t, `completed:\s+no: run the same command again`, r.out)
	waitEtcd(t, cli, l.Resizes(), func() error {
		st, err := op.ResizeStatus(ctx)
		if err != nil || st.Done != 1 || st.Fenced != 1 || st.Moving != 1 {
			return fmt.Errorf("group 0 not done and fenced, group 1 not moving: %+v, %v", st, err)
		}
		return nil
	})
	st = status()
	require.True(t, st.InProgress, "%+v", st)
	require.NotNil(t, st.Started)
	assert.Equal(t, resizeState{Revision: st.Revision, Partitions: parts, InProgress: true, ID: st.ID, From: parts, To: 32, By: "alice@ops",
		Reason: "grow", Budget: 1, Started: st.Started, Groups: 8, GroupsDone: 1, GroupsMoving: 1, GroupsFenced: 1}, st)
	assert.Regexp(t, `groups:\s+1 done, 1 moving, 1 fenced, of 8`, x.ok("spec", "resize", "status"))
	res = resizeResult{}
	x.json(&res, "spec", "resize", "--partitions", "32", "--reason", "plan", "--dry-run")
	assert.Equal(t, st.ID, res.ID, "a dry run of the resize in progress names it")
	assert.Equal(t, 1, res.Budget, "the budget it started with")
	var plan dryRun
	x.json(&plan, "balance", "plan")
	assert.Equal(t, "resize "+st.ID+" of the partition count, 8 -> 32", plan.Resizing, "the balancer pauses")
	assert.Empty(t, plan.Moves)
	assert.Regexp(t, `paused:\s+a resize `+st.ID+` of the partition count, 8 -> 32 is in progress`, x.ok("balance", "plan"))
	r = x.run("spec", "resize", "--partitions", "16", "--reason", "other")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.err, "another resize of the partition count is in progress")

	// Abort: group 0 moves back, group 1 stays, the resize ends at 8.
	res = resizeResult{}
	r = x.run("spec", "resize", "abort", "--reason", "wrong count", "--actor", "alice@ops", "--json")
	require.Zero(t, r.code, r.err)
	assert.Contains(t, r.err, "resize: aborting")
	require.NoError(t, checkVocabulary(r.out, map[string]bool{}), r.out)
	require.NoError(t, json.Unmarshal([]byte(r.out), &res))
	assert.True(t, res.Completed, "%+v", res)
	assert.Equal(t, parts, res.Partitions)
	st = status()
	assert.Equal(t, resizeState{Revision: st.Revision, Partitions: parts}, st)

	// The ghost gone, the resize completes, and back.
	_, err = cli.Revoke(ctx, ghost.ID)
	require.NoError(t, err)
	waitNodes(t, nodes, func() error {
		for _, n := range nodes {
			if p := n.Ring().Partitions(); p != parts {
				return fmt.Errorf("%s uses %d partitions after the abort", n.ID(), p)
			}
		}
		return settled(nodes, "")()
	})
	for _, to := range []int{32, 8} {
		res = resizeResult{}
		x.json(&res, "spec", "resize", "--partitions", fmt.Sprint(to), "--budget", "3", "--reason", "follow the fleet", "--actor", "bob@ops", "--timeout", "60s")
		require.True(t, res.Completed, "%+v", res)
		assert.Equal(t, to, res.To)
		assert.Positive(t, res.Writes)
		t.Logf("resize to %d: %.2fs, %d driver writes", to, res.Took, res.Writes)
		waitNodes(t, nodes, func() error {
			for _, n := range nodes {
				if p := n.Ring().Partitions(); p != to {
					return fmt.Errorf("%s uses %d partitions", n.ID(), p)
				}
			}
			return settled(nodes, "")()
		})
		var spec ring.Spec
		x.json(&spec, "spec")
		assert.Equal(t, to, spec.Partitions)
		for _, key := range []string{"orders/1", "users/42", "x"} {
			var o ownerOf
			x.json(&o, "owner-of", key)
			want := nodes[1].Lookup(key)
			assert.Equal(t, ring.PartitionOf(key, to), o.Partition, key)
			assert.Equal(t, want.Partition, o.Partition, key)
			assert.Equal(t, want.Owner, o.Owner, key)
			assert.Equal(t, want.Epoch, o.Epoch, key)
		}
	}
	assert.Contains(t, x.ok("spec", "resize", "--partitions", "8", "--reason", "again"), "nothing to do")

	var recs []fleet.AuditRecord
	x.json(&recs, "audit")
	var actions []string
	for _, r := range recs {
		actions = append(actions, r.Actor+" "+r.Action+" "+r.Node+" "+r.Reason)
	}
	assert.Equal(t, []string{
		"alice@ops resize-start 8->32 grow", "alice@ops resize-abort 8->32->8 wrong count", "alice@ops resize-complete 8->8 wrong count",
		"bob@ops resize-start 8->32 follow the fleet", "bob@ops resize-complete 8->32 follow the fleet",
		"bob@ops resize-start 32->8 follow the fleet", "bob@ops resize-complete 32->8 follow the fleet",
	}, actions)
	text = x.ok("audit")
	assert.Regexp(t, `resize-abort\s+partitions 8->32->8\s+-\s+-\s`, text)
	assert.Regexp(t, `resize-complete\s+partitions 32->8\s+-\s+-\s`, text)
}

// waitEtcd re-evaluates cond whenever a key under prefix changes, until it
// returns nil.
func waitEtcd(t *testing.T, cli *clientv3.Client, prefix string, cond func() error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	wc := cli.Watch(ctx, prefix, clientv3.WithPrefix())
	for {
		err := cond()
		if err == nil {
			return
		}
		select {
		case <-wc:
		case <-ctx.Done():
			t.Fatalf("not reached: %v", err)
		}
	}
}
