package doccheck

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/sim/cluster"
)

// logEvents are the events of README.md's Logs paragraph: how it names
// each (the words must stay in the paragraph), the start of the message
// a node prints for it, and the fields the paragraph names for it.
var logEvents = []struct {
	readme string
	msg    string
	fields []string
}{
	{"joined", "joined", []string{"node", "lease"}},
	{"left", "left the cluster", []string{"node"}},
	{"partitions acquired (epochs, how long they were unowned)", "acquired ", []string{"node", "lease", "count", "partitions", "epochs", "longest_unowned_for"}},
	{"released (reason; for a move, once its claims are deleted, with how long the handoff took)", "released ", []string{"node", "lease", "count", "partitions", "reason", "handoff"}},
	{"session lost (cause: `expired`", "session lost", []string{"node", "lease", "cause"}},
	{"renewal failing (`remaining`", "renewal failing", []string{"node", "lease", "remaining"}},
	{"fence rejection (scope, presented, current)", "fence rejection", []string{"node", "scope", "presented", "current"}},
	{"etcd revisions went backwards (Error, once when a rewind first holds partitions back: `floor`, `revision`, `epochs`", "etcd revisions went backwards", []string{"node", "count", "partitions", "epochs", "floor", "revision"}},
	{"`rewind over` once none is held back any more", "rewind over", []string{"node", "floor"}},
	{"forced release", "forced release observed", []string{"node", "lease", "count", "partitions"}},
	{"drain observed", "drain observed", []string{"node", "lease"}},
	{"a resize's group marked done (`resize: group done`", "resize: group done", []string{"node", "resize", "group", "from", "to", "ended", "begun", "revision"}},
}

// rangesRE matches the partitions field: ranges such as 0-5,9,12-15.
var rangesRE = regexp.MustCompile(`^\d+(-\d+)?(,\d+(-\d+)?)*$`)

// logsParagraph returns README.md's "**Logs.**" paragraph on one line.
func logsParagraph(t *testing.T, root string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(data), "\n**Logs.**")
	if !ok {
		t.Fatal("README.md has no **Logs.** paragraph")
	}
	para, _, _ := strings.Cut(rest, "\n\n")
	return strings.Join(strings.Fields(para), " ")
}

// logLines decodes hclog's JSON lines.
func logLines(t *testing.T, buf *testsupport.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

// findLog returns the first line whose message starts with msg, printed
// by node, and that has every field of fields.
func findLog(lines []map[string]any, node, msg string, fields ...string) map[string]any {
next:
	for _, l := range lines {
		if m, _ := l["@message"].(string); !strings.HasPrefix(m, msg) || l["node"] != node {
			continue
		}
		for _, f := range fields {
			if _, ok := l[f]; !ok {
				continue next
			}
		}
		return l
	}
	return nil
}

// waitLogged waits until node has printed a line that starts with msg.
func waitLogged(t *testing.T, buf *testsupport.Buffer, node, msg string) map[string]any {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		written := buf.Written()
		if l := findLog(logLines(t, buf), node, msg); l != nil {
			return l
		}
		select {
		case <-written:
		case <-deadline:
			t.Fatalf("%s did not log %q:\n%s", node, msg, buf.String())
		}
	}
}

// waitLoggedBy waits until one of nodes has logged a line that starts
// with msg.
func waitLoggedBy(t *testing.T, buf *testsupport.Buffer, msg string, nodes ...string) {
	t.Helper()
	deadline := time.After(30 * time.Second)
	for {
		written := buf.Written()
		lines := logLines(t, buf)
		for _, n := range nodes {
			if findLog(lines, n, msg) != nil {
				return
			}
		}
		select {
		case <-written:
		case <-deadline:
			t.Fatalf("none of %v logged %q:\n%s", nodes, msg, buf.String())
		}
	}
}

// The events README.md's Logs paragraph names are lines that nodes print,
// with the fields it names: two nodes on a real etcd, one of which has a
// store refuse its first epoch of a partition, hands partitions to the
// other, has a store's floor above etcd's revision (a rewind), has a
// claim force-released, takes the partitions of the other
// when an operator drains it, loses its session to an etcd it cannot
// reach for longer than its TTL, rejoins, doubles the partition count
// with the other (a resize), and both leave.
func TestLogsDocumented(t *testing.T) {
	root := moduleRoot(t)
	para := logsParagraph(t, root)
	for _, e := range logEvents {
		if !strings.Contains(para, e.readme) {
			t.Errorf("README.md's Logs paragraph no longer says %q: update logEvents with it", e.readme)
		}
	}
	for _, f := range []string{"`node`", "`lease`", "`count`", "`partitions`"} {
		if !strings.Contains(para, f) {
			t.Errorf("README.md's Logs paragraph no longer names the field %s", f)
		}
	}

	const fleetName, parts = "logs", 8
	c := cluster.New(t, 1)
	admin := c.NewClient(t)
	faulty, fp := c.NewFaultyClient(t)
	buf := &testsupport.Buffer{}
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: buf, JSONFormat: true})
	defer func() {
		if t.Failed() {
			t.Log(buf.String())
		}
	}()

	// A store refuses a's first epoch of partition 3 as stale, with a floor
	// etcd has issued (a newer epoch), and its first epoch of partition 5
	// with a floor above etcd's revision (as after a restore of etcd).
	var refused, rewound atomic.Bool
	cfgA := nodeConfig(fleetName, "a", parts, logger)
	cfgA.Fencers = []fence.Fencer{fence.FencerFunc(func(ctx context.Context, tok fence.Token) error {
		switch {
		case tok.Scope == fence.PartitionScope(3) && refused.CompareAndSwap(false, true):
			resp, err := admin.Put(ctx, "doccheck/newer", "")
			if err != nil {
				return err
			}
			return &fence.StaleError{Scope: tok.Scope, Presented: tok.Epoch, Current: resp.Header.Revision}
		case tok.Scope == fence.PartitionScope(5) && rewound.CompareAndSwap(false, true):
			return &fence.StaleError{Scope: tok.Scope, Presented: tok.Epoch, Current: 1 << 40}
		}
		return nil
	})}
	a := join(t, faulty, cfgA)
	waitStable(t, a)
	b := join(t, admin, nodeConfig(fleetName, "b", parts, logger))
	waitStable(t, a, b)
	waitLogged(t, buf, "a", "released ")

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	op, err := fleet.NewOperator(admin, fleet.OperatorConfig{Cluster: fleetName})
	if err != nil {
		t.Fatal(err)
	}
	act := fleet.Action{Actor: "doccheck", Reason: "the README's log lines"}
	if _, err := op.ForceRelease(ctx, fence.PartitionScope(a.Owned()[0]), act); err != nil {
		t.Fatal(err)
	}
	waitLogged(t, buf, "a", "forced release observed")
	if _, err := op.Drain(ctx, "b", act); err != nil {
		t.Fatal(err)
	}
	waitLogged(t, buf, "b", "drain observed")
	waitUntil(t, func() error {
		if len(a.Owned()) != parts {
			return fmt.Errorf("a serves %d of %d partitions after b's drain", len(a.Owned()), parts)
		}
		return nil
	}, a, b)

	fp.Blackhole()
	waitLogged(t, buf, "a", "session lost: released")
	fp.Heal()
	waitLogged(t, buf, "a", "rejoined")
	rep, err := op.Resize(ctx, 2*parts, fleet.ResizeOptions{Actor: act.Actor, Reason: act.Reason})
	if err != nil || !rep.Completed {
		t.Fatalf("resize to %d partitions: %+v, %v", 2*parts, rep, err)
	}
	waitLoggedBy(t, buf, "resize: group done", "a", "b")
	leave(t, b)
	leave(t, a)

	lines := logLines(t, buf)
	for _, e := range logEvents {
		l := findLog(lines, "a", e.msg, e.fields...)
		if l == nil {
			l = findLog(lines, "b", e.msg, e.fields...)
		}
		if l == nil {
			t.Errorf("README.md names %q, but no node printed a line %q with the fields %v", e.readme, e.msg, e.fields)
			continue
		}
		if p, ok := l["partitions"].(string); ok && !rangesRE.MatchString(p) {
			t.Errorf("%q: partitions %q are not ranges", e.msg, p)
		}
	}
	if l := findLog(lines, "a", "session lost", "cause"); l == nil || l["cause"] != "expired" {
		t.Errorf("a session lost to an unreachable etcd is not logged with the cause expired: %v", l)
	} else if !strings.Contains(para, "`expired`") {
		t.Error("README.md's Logs paragraph does not name the cause `expired`")
	}
}
