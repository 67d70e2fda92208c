package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/cluster"
)

func TestMain(m *testing.M) { testsupport.VerifyTestMain(m) }

// ctl runs the tenurectl binary.
type ctl struct {
	t    *testing.T
	bin  string
	base []string // global flags
}

type result struct {
	out, err string
	code     int
	took     time.Duration
}

func (c ctl) run(args ...string) result {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, c.bin, append(append([]string{}, c.base...), args...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	r := result{out: stdout.String(), err: stderr.String(), took: time.Since(start)}
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		r.code = ee.ExitCode()
	case err != nil:
		c.t.Fatalf("run tenurectl %v: %v", args, err)
	}
	return r
}

// ok runs a command that must succeed.
func (c ctl) ok(args ...string) string {
	c.t.Helper()
	r := c.run(args...)
	require.Zero(c.t, r.code, "tenurectl %v: %s", args, r.err)
	c.t.Logf("tenurectl %s\n%s", strings.Join(args, " "), r.out)
	return r.out
}

// json runs a command with --json, checks its output against the
// vocabulary (see vocabulary_test.go) and decodes it into v.
func (c ctl) json(v any, args ...string) {
	c.t.Helper()
	out := c.ok(append(args, "--json")...)
	require.True(c.t, json.Valid([]byte(out)), "tenurectl %v --json: %s", args, out)
	require.NoError(c.t, checkVocabulary(out, map[string]bool{}), "tenurectl %v --json: %s", args, out)
	require.NoError(c.t, json.Unmarshal([]byte(out), v), out)
}

// waitNodes re-evaluates cond whenever a node publishes a new routing
// snapshot, until it returns nil.
func waitNodes(t *testing.T, nodes []*ownership.Node, cond func() error) {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		cases := []reflect.SelectCase{{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(deadline.C)}}
		for _, n := range nodes {
			cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(n.Changed())})
		}
		err := cond()
		if err == nil {
			return
		}
		if i, _, _ := reflect.Select(cases); i == 0 {
			t.Fatalf("not reached: %v", err)
		}
	}
}

// settled returns nil once every partition is served by its owner on the
// ring of members not drained, as every node sees it.
func settled(nodes []*ownership.Node, drained string) func() error {
	return func() error {
		byID := map[string]*ownership.Node{}
		var want []string
		for _, n := range nodes {
			byID[n.ID()] = n
			if n.ID() != drained {
				want = append(want, n.ID())
			}
		}
		for _, n := range nodes {
			if got := n.Ring().Members(); fmt.Sprint(got) != fmt.Sprint(want) {
				return fmt.Errorf("%s: ring %v, want %v", n.ID(), got, want)
			}
		}
		for p := range nodes[0].Ring().Partitions() {
			owner, _ := nodes[0].Ring().Owner(p)
			r := byID[owner].LookupPartition(p)
			if !r.Local {
				return fmt.Errorf("partition %d: %s does not serve it yet", p, owner)
			}
			for _, n := range nodes {
				if got := n.LookupPartition(p); got.Owner != owner || got.Epoch != r.Epoch {
					return fmt.Errorf("partition %d: %s sees %+v", p, n.ID(), got)
				}
			}
		}
		return nil
	}
}

// buildCtl builds the tenurectl binary and returns its path.
func buildCtl(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "tenurectl")
	build := exec.Command("go", "build", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestTenurectl builds tenurectl and runs it against a 3-member etcd and a
// live fleet of 3 nodes in this process.
func TestTenurectl(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts a 3-member etcd")
	}
	bin := buildCtl(t)
	c := cluster.New(t, 3)
	cli := c.NewClient(t)
	const name, parts = "ctl", 16
	store, err := etcdfence.New(cli, etcdfence.Config{Cluster: name})
	require.NoError(t, err)
	var nodes []*ownership.Node
	for _, id := range []string{"n1", "n2", "n3"} {
		cfg := ownership.DefaultConfig()
		cfg.Cluster, cfg.NodeID, cfg.Addr = name, id, id+":7000"
		cfg.Ring.Partitions = parts
		cfg.Session.TTL = 2 * time.Second
		cfg.Fencers = []fence.Fencer{store}
		nodes = append(nodes, joinNode(t, cli, cfg))
	}
	waitNodes(t, nodes, settled(nodes, ""))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = cli.Put(ctx, fleet.DefaultPrefix(name)+"leader/sched/1", `{"id":"n2","value":"n2:7000"}`)
	require.NoError(t, err)

	x := ctl{t: t, bin: bin, base: []string{"--endpoints", strings.Join(c.Endpoints(), ","), "--cluster", name, "--timeout", "10s"}}

	// Every listing, as text and as JSON.
	var spec ring.Spec
	x.json(&spec, "spec")
	assert.Equal(t, parts, spec.Partitions)
	assert.Contains(t, x.ok("spec"), "partitions:")

	var members []fleet.MemberStatus
	x.json(&members, "members")
	require.Len(t, members, 3)
	for _, m := range members {
		assert.Positive(t, m.TTLLeft, m.ID)
		assert.Positive(t, m.Owned, m.ID)
		assert.Equal(t, m.ID+":7000", m.Addr)
	}
	assert.Contains(t, x.ok("members"), "n3:7000")

	var ps []fleet.PartitionStatus
	x.json(&ps, "partitions")
	require.Len(t, ps, parts)
	for _, p := range ps {
		r := nodes[0].LookupPartition(p.Partition)
		assert.Equal(t, r.Owner, p.Owner)
		assert.Equal(t, r.Epoch, p.Epoch)
		assert.False(t, p.Since.IsZero())
	}
	var mine []fleet.PartitionStatus
	x.json(&mine, "partitions", "--node", "n1")
	assert.Len(t, mine, len(nodes[0].Owned()))
	assert.Contains(t, x.ok("partitions", "--node", "n2"), "n2:7000")

	for _, key := range []string{"orders/1", "users/42", "x"} {
		var o struct {
			Key string `json:"key"`
			fleet.PartitionStatus
		}
		x.json(&o, "owner-of", key)
		want := nodes[1].Lookup(key)
		assert.Equal(t, key, o.Key)
		assert.Equal(t, want.Partition, o.Partition, key)
		assert.Equal(t, want.Owner, o.Owner, key)
		assert.Equal(t, want.Epoch, o.Epoch, key)
		assert.Contains(t, x.ok("owner-of", key), want.Owner)
	}

	var leaders []fleet.LeaderStatus
	x.json(&leaders, "leaders")
	require.Len(t, leaders, 1)
	assert.Equal(t, "sched", leaders[0].Election)
	assert.Equal(t, "n2", leaders[0].Holder)
	assert.Contains(t, x.ok("leaders"), "sched")

	var st fleet.Status
	x.json(&st, "status")
	assert.True(t, len(st.Unowned) == 0 && len(st.Handoffs) == 0, "%+v", st)
	assert.Empty(t, st.Idle)
	assert.Contains(t, x.ok("status"), "settled:")
	// The ring version is printed as --json and /readyz print it: decimal.
	assert.Contains(t, x.ok("status"), fmt.Sprintf("ring version:  %d\n", st.RingVersion))

	var recs []fleet.AuditRecord
	x.json(&recs, "audit")
	assert.Empty(t, recs)
	assert.Contains(t, x.ok("audit"), "ACTOR")

	// Force release: refused without a reason, then done and audited.
	p := nodes[0].Owned()[0]
	h, err := nodes[0].HoldPartition(p)
	require.NoError(t, err)
	old, oldCtx := h.Token, h.Context
	h.Release()
	_, err = store.Put(ctx, old, "k", []byte("v1"))
	require.NoError(t, err)
	r := x.run("force-release", "partition", strconv.Itoa(p))
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.err, "--reason")

	var rec fleet.AuditRecord
	x.json(&rec, "force-release", "partition", strconv.Itoa(p), "--reason", "stuck consumer", "--actor", "alice@ops")
	assert.Equal(t, old.Epoch, rec.OldEpoch)
	select {
	case <-oldCtx.Done():
	case <-time.After(30 * time.Second):
		t.Fatal("the old holder's context was not cancelled")
	}
	waitNodes(t, nodes, func() error {
		if r := nodes[0].LookupPartition(p); !r.Local || r.Epoch <= old.Epoch {
			return fmt.Errorf("partition %d not re-owned: %+v", p, r)
		}
		return nil
	})
	newEpoch := nodes[0].LookupPartition(p).Epoch
	_, err = store.Put(ctx, old, "k", []byte("zombie"))
	require.ErrorIs(t, err, fence.ErrStale)
	x.json(&recs, "audit", "--since", "1h")
	require.Len(t, recs, 1)
	assert.Equal(t, "alice@ops", recs[0].Actor)
	assert.Equal(t, "force-release", recs[0].Action)
	assert.Equal(t, "stuck consumer", recs[0].Reason)
	assert.False(t, recs[0].Time.IsZero())
	assert.Equal(t, old.Epoch, recs[0].OldEpoch)
	assert.Equal(t, newEpoch, recs[0].NewEpoch)
	assert.Contains(t, x.ok("audit"), "stuck consumer")

	// Drain: refused without a reason; then n2 serves nothing and stays a
	// member; undrain gives it partitions back.
	r = x.run("drain", "n2")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.err, "--reason")
	x.ok("drain", "n2", "--reason", "kernel upgrade")
	waitNodes(t, nodes, func() error {
		if o := nodes[1].Owned(); len(o) > 0 {
			return fmt.Errorf("n2 still owns %v", o)
		}
		return settled(nodes, "n2")()
	})
	x.json(&members, "members")
	require.Len(t, members, 3)
	assert.True(t, members[1].Drained)
	assert.Zero(t, members[1].Owned)
	x.json(&st, "status")
	assert.Equal(t, []string{"n2"}, st.Drained)
	assert.Equal(t, []string{"n2"}, st.Idle)
	x.ok("undrain", "n2")
	waitNodes(t, nodes, settled(nodes, ""))
	assert.NotEmpty(t, nodes[1].Owned())
	x.json(&recs, "audit")
	require.Len(t, recs, 3)
	assert.Equal(t, "undrain", recs[2].Action)

	// Pin: refused without a reason; then the partition moves to the pinned
	// node at a new epoch, the placement report shows it as the nodes see
	// it, and unpin gives it back to the ring.
	pp := nodes[0].Owned()[0]
	pinBefore := nodes[0].LookupPartition(pp).Epoch
	r = x.run("pin", strconv.Itoa(pp), "n3")
	assert.Equal(t, 2, r.code)
	assert.Contains(t, r.err, "--reason")
	x.json(&rec, "pin", strconv.Itoa(pp), "n3", "--reason", "hot tenant", "--actor", "alice@ops")
	assert.Equal(t, "pin", rec.Action)
	assert.Equal(t, "n3", rec.Node, "the pin's node")
	assert.Equal(t, "n1", rec.Holder, "the claim's holder when it was pinned")
	pinned := rec
	waitNodes(t, nodes, func() error {
		if r := nodes[2].LookupPartition(pp); !r.Local || r.Epoch <= pinBefore {
			return fmt.Errorf("partition %d not moved to n3: %+v", pp, r)
		}
		return nil
	})
	var rep fleet.PlacementReport
	x.json(&rep, "placement")
	require.Len(t, rep.Placements, 1)
	assert.Equal(t, fleet.PlacementStatus{Partition: pp, Node: "n3", Origin: "pin", By: "alice@ops", Reason: "hot tenant", Applied: true,
		Moved: pinned.Time.Truncate(time.Millisecond)}, rep.Placements[0])
	text := x.ok("placement")
	assert.Regexp(t, `ring algorithm:\s+weighted\n`, text)
	assert.Contains(t, text, stamp(pinned.Time.Truncate(time.Millisecond)), "MOVED AT is the pin's time")
	require.Len(t, rep.Members, 3)
	for _, m := range rep.Members {
		n := map[string]*ownership.Node{"n1": nodes[0], "n2": nodes[1], "n3": nodes[2]}[m.ID]
		assert.Len(t, n.Ring().Owned(m.ID), m.Partitions, m.ID)
		assert.Equal(t, 1, m.Weight)
	}
	assert.GreaterOrEqual(t, rep.Imbalance, 1.0)
	assert.Contains(t, x.ok("placement"), "hot tenant")
	x.ok("unpin", strconv.Itoa(pp), "--reason", "tenant cooled")
	waitNodes(t, nodes, settled(nodes, ""))
	x.json(&rep, "placement")
	assert.Empty(t, rep.Placements)
	x.json(&recs, "audit")
	require.Len(t, recs, 5)
	assert.Equal(t, "pin", recs[3].Action)
	assert.Equal(t, "n1", recs[3].Holder)
	assert.Equal(t, "n3", recs[3].Node)
	assert.Equal(t, "unpin", recs[4].Action)
	assert.Equal(t, "n3", recs[4].Holder, "n3 served the pinned partition when it was unpinned")
	assert.Equal(t, "n3", recs[4].Node)

	// etcd unreachable: a clear failure within the timeout.
	down := ctl{t: t, bin: bin, base: []string{"--endpoints", "127.0.0.1:1", "--cluster", name, "--timeout", "1s"}}
	r = down.run("status")
	assert.Equal(t, 1, r.code)
	assert.Contains(t, r.err, "did not answer within 1s")
	assert.Contains(t, r.err, "connection refused", "the error names the cause")
	assert.Less(t, r.took, 10*time.Second)
	r = down.run("members", "--json")
	assert.NotZero(t, r.code)
}

// Without --cluster, tenurectl lists the fleets it finds instead of
// guessing one; a fleet without a spec is reported with the fleets that
// exist.
func TestTenurectlFleets(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts etcd")
	}
	bin := buildCtl(t)
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	spec, err := fleetview.EncodeSpec(ring.Config{Partitions: 64, LoadFactor: 1.25}.Spec())
	require.NoError(t, err)
	for k, v := range map[string]string{
		fleet.DefaultPrefix("alpha") + "spec":           string(spec),
		fleet.DefaultPrefix("alpha") + "members/n1":     `{"id":"n1","addr":"n1:1"}`,
		fleet.DefaultPrefix("sched") + "leader/job/1":   `{"id":"n2"}`,
		fleet.DefaultPrefix("beta") + "spec":            string(spec),
		"/tenure/stray":                                 "a key right under the root",
		fleet.DefaultPrefix("alpha") + "claims/3":       "n1",
		fleet.DefaultPrefix("alpha") + "audit/whatever": "{}",
	} {
		_, err := cli.Put(ctx, k, v)
		require.NoError(t, err)
	}
	x := ctl{t: t, bin: bin, base: []string{"--endpoints", strings.Join(c.Endpoints(), ","), "--timeout", "10s"}}

	const found = "fleets under /tenure/: alpha (64 partitions), beta (64 partitions), sched (no spec)"
	r := x.run("status")
	assert.Equal(t, 2, r.code, r.err)
	assert.Contains(t, r.err, "no fleet chosen")
	assert.Contains(t, r.err, found)

	r = x.run("status", "--cluster", "gamma")
	assert.Equal(t, 1, r.code, r.err)
	assert.Contains(t, r.err, "no spec")
	assert.Contains(t, r.err, found)

	var fleets []struct {
		Cluster string     `json:"cluster"`
		Prefix  string     `json:"prefix"`
		Spec    *ring.Spec `json:"spec"`
	}
	x.json(&fleets, "fleets")
	require.Len(t, fleets, 3)
	assert.Equal(t, "alpha", fleets[0].Cluster)
	assert.Equal(t, "/tenure/alpha/", fleets[0].Prefix)
	require.NotNil(t, fleets[0].Spec)
	assert.Equal(t, 64, fleets[0].Spec.Partitions)
	assert.Equal(t, "sched", fleets[2].Cluster)
	assert.Nil(t, fleets[2].Spec)
	assert.Contains(t, x.ok("fleets"), "sched")

	assert.Contains(t, x.ok("status", "--cluster", "alpha"), "members:")
}

// joinNode joins a node of cfg, closed when the test ends.
func joinNode(t *testing.T, cli *clientv3.Client, cfg ownership.Config) *ownership.Node {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	n, err := ownership.Join(ctx, cli, cfg)
	cancel()
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = n.Close(ctx)
	})
	return n
}
