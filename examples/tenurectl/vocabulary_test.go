package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/internal/fleetview"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/balance"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/cluster"
)

// kind is what a JSON value of the vocabulary holds.
type kind string

const (
	kString     kind = "string"
	kTime       kind = "time (RFC 3339 string)"
	kAlgorithm  kind = "ring algorithm name"
	kInt        kind = "integer"
	kNumber     kind = "number"
	kBool       kind = "bool"
	kObject     kind = "object of vocabulary keys"
	kIntList    kind = "list of integers"
	kStringList kind = "list of strings"
	kObjectList kind = "list of objects of vocabulary keys"
	kIntMap     kind = "object of integers by free keys"
	kNumberMap  kind = "object of numbers by free keys"
	kStringMap  kind = "object of strings by free keys"
)

// vocabulary is tenurectl's one JSON vocabulary: every key any command's
// --json prints, with what its value holds, the same in every command. A
// key not listed fails TestTenurectlJSONVocabulary (and every --json
// output the tests decode), and so does a null anywhere.
var vocabulary = map[string]kind{
	// Fleets and the spec.
	"cluster": kString, "prefix": kString, "spec": kObject,
	"partitions": kInt, "load_factor": kNumber, "ring_algorithm": kAlgorithm,
	// Members.
	"id": kString, "addr": kString, "meta": kStringMap, "lease": kInt, "ttl_left_seconds": kNumber,
	"drained": kBool, "drain": kObject, "owned": kInt,
	"actor": kString, "reason": kString, "time": kTime,
	// Partitions and owner-of.
	"partition": kInt, "owner": kString, "epoch": kInt, "since": kTime, "next": kString,
	"placed": kString, "handoff": kBool, "key": kString,
	// Leaders.
	"election": kString, "holder": kString, "value": kString, "candidates": kInt,
	// Status.
	"revision": kInt, "ring_version": kInt, "member_ids": kStringList, "drained_ids": kStringList,
	"idle_ids": kStringList, "unowned": kIntList, "handoffs": kObjectList, "owned_by_member": kIntMap,
	"alarms": kObjectList, "alarm": kString, "etcd_member": kString,
	// Audit records.
	"action": kString, "target": kString, "node": kString, "old_epoch": kInt, "new_epoch": kInt,
	// Placement.
	"members": kObjectList, "imbalance": kNumber, "load_imbalance": kNumber, "placements": kObjectList,
	"balancer": kObject, "weight": kInt, "per_weight": kNumber, "capacity": kInt, "load": kNumber,
	"load_per_weight": kNumber, "load_window_seconds": kNumber, "origin": kString, "by": kString,
	"snapshot_revision": kInt, "moved": kTime, "applied": kBool,
	// The balancer: its state, last pass and dry run.
	"suspended": kObject, "last_pass": kObject, "term": kInt, "moves": kObjectList, "removals": kIntList,
	"before": kNumber, "after": kNumber, "upper": kNumber, "lower": kNumber, "budget": kNumber,
	"cooldown_seconds": kNumber, "from": kString, "to": kString, "loads": kNumberMap, "config": kObject,
	"source": kString,
	// The fleet version and ring-algorithm migrations.
	"build": kString, "features": kStringList, "requires": kStringList, "migration": kObject,
	"moves_left": kInt, "moves_placed": kInt, "steps": kInt, "done": kBool, "dry_run": kBool,
	"abort": kBool, "started": kTime, "step_partitions": kIntList,
	// rewind-check.
	"floor_epoch": kInt, "floor_scope": kString, "rewound": kBool, "margin": kInt, "bump_revision": kInt,
	// The resize of the partition count: its dry run, a run's report and
	// its status.
	"from_partitions": kInt, "to_partitions": kInt, "groups": kInt, "partition_moves": kInt,
	"etcd_writes": kInt, "took_seconds": kNumber, "completed": kBool,
	"resizing": kString, "in_progress": kBool, "aborting": kBool, "groups_done": kInt, "groups_moving": kInt, "groups_fenced": kInt,
}

// rareKeys are vocabulary keys TestTenurectlJSONVocabulary need not see:
// a handoff shows only while a move is in progress, an etcd alarm only
// while one stands (TestTenurectlAlarms sees them), and the balancer's
// pause for a resize only while one is in progress (TestTenurectlResize
// checks it against the vocabulary).
var rareKeys = map[string]bool{"handoff": true, "alarm": true, "etcd_member": true, "resizing": true}

// TestVocabularyRules holds the vocabulary to its own rules: revisions are
// "revision" or "<what>_revision", never "rev"; durations are numbers of
// seconds under keys that say so, never nanoseconds.
func TestVocabularyRules(t *testing.T) {
	for key, k := range vocabulary {
		assert.NotEqual(t, "rev", key)
		assert.False(t, strings.HasSuffix(key, "_ns") || strings.HasSuffix(key, "_rev"), key)
		assert.Equal(t, key == "revision" || strings.HasSuffix(key, "_revision"), strings.Contains(key, "revision"), key)
		if strings.HasSuffix(key, "_seconds") {
			assert.Equal(t, kNumber, k, key)
		}
		for _, word := range []string{"cooldown", "ttl", "window", "timeout", "duration"} {
			if strings.Contains(key, word) {
				assert.True(t, strings.HasSuffix(key, "_seconds"), "%s: a duration says its unit", key)
			}
		}
	}
}

// checkVocabulary walks out, a command's --json output, and returns the
// first value that breaks the vocabulary: a null, a key it does not list,
// or a value of another kind than the key's. It adds every key it met to
// seen.
func checkVocabulary(out string, seen map[string]bool) error {
	dec := json.NewDecoder(strings.NewReader(out))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	switch top := v.(type) {
	case []any:
		return checkList(top, "$", kObject, seen)
	case map[string]any:
		return checkObject(top, "$", seen)
	}
	return fmt.Errorf("$: %T is neither an object nor a list", v)
}

func checkObject(obj map[string]any, path string, seen map[string]bool) error {
	for _, key := range slices.Sorted(maps.Keys(obj)) {
		k, ok := vocabulary[key]
		if !ok {
			return fmt.Errorf("%s.%s: key not in the vocabulary", path, key)
		}
		seen[key] = true
		if err := checkValue(obj[key], path+"."+key, k, seen); err != nil {
			return err
		}
	}
	return nil
}

func checkValue(v any, path string, k kind, seen map[string]bool) error {
	if v == nil {
		return fmt.Errorf("%s: null (an empty list is [], an absent value is left out)", path)
	}
	bad := fmt.Errorf("%s: %#v is not a %s", path, v, k)
	switch k {
	case kString, kTime, kAlgorithm:
		s, ok := v.(string)
		switch {
		case !ok:
			return bad
		case k == kTime:
			if _, err := time.Parse(time.RFC3339Nano, s); err != nil {
				return bad
			}
		case k == kAlgorithm:
			var a ring.Algorithm
			if a.UnmarshalText([]byte(s)) != nil || a == 0 {
				return bad
			}
		}
	case kInt, kNumber:
		n, ok := v.(json.Number)
		if !ok {
			return bad
		}
		if _, err := n.Int64(); k == kInt && err != nil {
			if _, uerr := strconv.ParseUint(n.String(), 10, 64); uerr != nil {
				return bad
			}
		}
	case kBool:
		if _, ok := v.(bool); !ok {
			return bad
		}
	case kObject:
		obj, ok := v.(map[string]any)
		if !ok {
			return bad
		}
		return checkObject(obj, path, seen)
	case kIntList, kStringList, kObjectList:
		list, ok := v.([]any)
		if !ok {
			return bad
		}
		return checkList(list, path, map[kind]kind{kIntList: kInt, kStringList: kString, kObjectList: kObject}[k], seen)
	case kIntMap, kNumberMap, kStringMap:
		obj, ok := v.(map[string]any)
		if !ok {
			return bad
		}
		for key, e := range obj {
			if err := checkValue(e, path+"["+strconv.Quote(key)+"]", map[kind]kind{kIntMap: kInt, kNumberMap: kNumber, kStringMap: kString}[k], seen); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkList(list []any, path string, elem kind, seen map[string]bool) error {
	for i, e := range list {
		if err := checkValue(e, fmt.Sprintf("%s[%d]", path, i), elem, seen); err != nil {
			return err
		}
	}
	return nil
}

// TestCheckVocabulary: the walker refuses what the vocabulary forbids.
func TestCheckVocabulary(t *testing.T) {
	seen := map[string]bool{}
	for _, ok := range []string{
		`[]`,
		`{"revision": 7, "member_ids": [], "spec": {"partitions": 16, "load_factor": 1.25, "ring_algorithm": "weighted"}}`,
		`[{"id": "n1", "ttl_left_seconds": 1.5, "meta": {"zone": "a"}, "since": "2026-01-02T03:04:05.123Z"}]`,
		`{"ring_version": 18446744073709551615, "owned_by_member": {"n1": 3}}`,
	} {
		assert.NoError(t, checkVocabulary(ok, seen), ok)
	}
	for _, bad := range []string{
		`{"rev": 7}`,
		`{"cooldown": 60000000000}`,
		`{"ttl_left_ns": 5}`,
		`{"member_ids": null}`,
		`{"moves": null}`,
		`{"revision": "7"}`,
		`{"revision": 7.5}`,
		`{"ring_algorithm": 2}`,
		`{"ring_algorithm": "count-only"}`,
		`{"since": "yesterday"}`,
		`{"drained": ["n2"]}`,
		`{"spec": {"partitions": 16, "extra": 1}}`,
		`[{"id": "n1", "meta": {"zone": null}}]`,
	} {
		assert.Error(t, checkVocabulary(bad, seen), bad)
	}
}

// TestTenurectlJSONVocabulary builds tenurectl and runs every command with
// --json against a live fleet (two nodes, one of weight 2; a member that
// never claims, with load, so that the balancer moves partitions; a
// balancer; a leader), at moments that fill every optional field: each
// output must keep to the vocabulary, every command and balance
// subcommand must be run, and every key of the vocabulary must be seen.
func TestTenurectlJSONVocabulary(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary and starts etcd")
	}
	bin := buildCtl(t)
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	const name, parts = "ctl-vocab", 32
	var nodes []*ownership.Node
	for i, id := range []string{"n1", "n2"} {
		cfg := ownership.DefaultConfig()
		cfg.Cluster, cfg.NodeID, cfg.Addr, cfg.Weight = name, id, id+":7000", i+1
		cfg.Meta = map[string]string{"zone": "z" + strconv.Itoa(i)}
		cfg.Ring.Partitions = parts
		cfg.Session.TTL = 2 * time.Second
		nodes = append(nodes, joinNode(t, cli, cfg))
	}
	// h1: a member without a lease that claims nothing, loaded.
	l := keys.New(name)
	v, err := keys.EncodeMember(keys.Member{ID: "h1", Addr: "h1:1", Features: fleetview.Features()})
	require.NoError(t, err)
	_, err = cli.Put(ctx, l.Member("h1"), v)
	require.NoError(t, err)
	owning := func() error {
		for _, n := range nodes {
			if len(n.Owned()) == 0 || !slices.Contains(n.Ring().Members(), "h1") {
				return fmt.Errorf("%s owns %v of ring %v", n.ID(), n.Owned(), n.Ring().Members())
			}
		}
		return nil
	}
	waitNodes(t, nodes, owning)
	r := nodes[0].Ring()
	rep := keys.LoadReport{Window: 30}
	for _, p := range r.Owned("h1") {
		rep.Partitions, rep.Loads = append(rep.Partitions, p), append(rep.Loads, 50)
	}
	_, err = cli.Put(ctx, l.Load("h1"), keys.EncodeLoadReport(rep))
	require.NoError(t, err)
	_, err = cli.Put(ctx, l.Leaders()+"sched/1", `{"id":"n2","value":"n2:7000"}`)
	require.NoError(t, err)

	sess, err := election.NewSession(ctx, cli, election.SessionConfig{TTL: 2 * time.Second})
	require.NoError(t, err)
	defer func() { _ = sess.Close(context.Background()) }()
	e, err := election.NewElection(sess, cli, cli, election.ElectionConfig{Cluster: name, Name: "balancer"})
	require.NoError(t, err)
	defer func() { _ = e.Close(context.Background()) }()
	term, err := e.Campaign(ctx)
	require.NoError(t, err)
	b, err := balance.NewBalancer(cli, balance.Config{Cluster: name, Budget: 0.1})
	require.NoError(t, err)

	x := ctl{t: t, bin: bin, base: []string{"--endpoints", strings.Join(c.Endpoints(), ","), "--cluster", name, "--timeout", "10s"}}
	seen := map[string]bool{}
	ran := map[string]bool{}
	run := func(args ...string) string {
		t.Helper()
		out := x.ok(append(args, "--json")...)
		require.NoError(t, checkVocabulary(out, seen), "tenurectl %s --json:\n%s", strings.Join(args, " "), out)
		cmd := args[0]
		switch {
		case cmd == "balance":
			cmd += " " + args[1]
		case cmd == "spec" && len(args) > 1 && args[1] == "resize":
			cmd += " resize"
			if resizeCommands[args[2]] != nil {
				cmd += " " + args[2]
			}
		}
		ran[cmd] = true
		return out
	}

	for _, args := range [][]string{
		{"fleets"}, {"spec"}, {"members"}, {"partitions"}, {"partitions", "--node", "nobody"},
		{"owner-of", "orders/1"}, {"status"}, {"placement"}, {"balance", "plan"},
		{"balance", "suspend", "--reason", "incident 7"}, {"placement"}, {"balance", "plan"},
		{"balance", "resume", "--reason", "incident over"},
	} {
		run(args...)
	}
	pl, err := b.Plan(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, pl.Moves, "h1 is loaded and the others are not")
	require.NoError(t, b.Apply(ctx, term, pl))
	run("leaders")

	// A pin, and a force release once it is served: the audit then fills
	// the released partition's new epoch.
	p := nodes[0].Owned()[0]
	run("pin", strconv.Itoa(p), "n2", "--reason", "hot tenant")
	waitNodes(t, nodes, func() error {
		if !nodes[1].LookupPartition(p).Local {
			return fmt.Errorf("partition %d not served by n2 yet", p)
		}
		return nil
	})
	run("partitions")
	out := run("force-release", "partition", strconv.Itoa(p), "--reason", "stuck")
	var released fleet.AuditRecord
	require.NoError(t, json.Unmarshal([]byte(out), &released))
	waitNodes(t, nodes, func() error {
		if r := nodes[1].LookupPartition(p); !r.Local || r.Epoch <= released.OldEpoch {
			return fmt.Errorf("partition %d not claimed again: %+v", p, r)
		}
		return nil
	})
	run("audit") // while n2 holds p's new claim: the release's new_epoch
	run("force-release", "leader", "sched", "--reason", "stale leader")
	run("drain", "n2", "--reason", "kernel upgrade")
	run("members")
	run("placement")
	run("undrain", "n2")
	run("unpin", strconv.Itoa(p), "--reason", "tenant cooled")
	// h1 leaves before the resize: a resize ends once a holder of each
	// group's targets has retired its sources, and h1 holds nothing.
	_, err = cli.Delete(ctx, l.Member("h1"))
	require.NoError(t, err)
	run("spec", "resize", "--partitions", "64", "--reason", "plan", "--dry-run")
	run("spec", "resize", "--partitions", "64", "--reason", "grow", "--timeout", "60s")
	run("spec", "resize", "status")
	run("audit")
	run("rewind-check", "--db", fencesDB(t, map[string]int64{"p/0": 1 << 40}))

	// A ring-algorithm migration: a dry run, and one that runs (its
	// record, as a driver stopped between two steps leaves it), reported
	// and aborted.
	run("spec", "algorithm", "bounded", "--dry-run")
	_, err = cli.Put(ctx, l.Migration(), keys.EncodeJSON(keys.MigrationRecord{Target: int(ring.AlgorithmBounded), Budget: 4, Actor: "alice",
		Reason: "count-only", Time: time.Now()}))
	require.NoError(t, err)
	_, err = cli.Put(ctx, l.Placement(0), keys.EncodePlacement(keys.Placement{Node: "n1", Origin: keys.OriginMigration, By: "alice"}))
	require.NoError(t, err)
	run("spec", "algorithm", "status")
	run("status")
	run("spec", "algorithm", "abort", "--reason", "changed my mind")
	run("audit")

	want := slices.Sorted(maps.Keys(commands))
	for sub := range balanceCommands {
		want = append(want, "balance "+sub)
	}
	want = append(want, "spec resize", "spec resize status")
	for _, cmd := range want {
		assert.True(t, ran[cmd] || cmd == "balance", "tenurectl %s --json was not checked against the vocabulary", cmd)
	}
	assert.Equal(t, []string{"abort", "status"}, slices.Sorted(maps.Keys(resizeCommands)),
		"spec resize abort prints an audit record, checked by TestTenurectlResize; a new subcommand is run here")
	for key := range vocabulary {
		assert.True(t, seen[key] || rareKeys[key], "no output had %q: a vocabulary key no command prints", key)
	}
}
