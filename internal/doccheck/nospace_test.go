package doccheck

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/sim/cluster"
)

// noSpaceEvents are the lines README.md's Logs paragraph names for etcd's
// NOSPACE alarm, as logEvents are.
var noSpaceEvents = []struct {
	readme string
	msg    string
	fields []string
}{
	{"`etcd database full (NOSPACE alarm): keeping N partitions until it is disarmed`", "etcd database full (NOSPACE alarm): keeping ", []string{"node", "lease", "partitions"}},
	{"`etcd takes writes again: the planned releases that waited go on` (`waited`)", "etcd takes writes again: the planned releases that waited go on", []string{"node", "waited"}},
}

// The NOSPACE lines README.md's Logs paragraph names are lines that nodes
// print, against a real alarm: two nodes on an etcd whose small quota is
// filled; one leaves gracefully while the alarm stands and says it keeps
// its partitions; once the space is reclaimed and the alarm disarmed, it
// says that its releases go on, and its Close completes.
func TestNoSpaceLogsDocumented(t *testing.T) {
	para := logsParagraph(t, moduleRoot(t))
	for _, e := range noSpaceEvents {
		if !strings.Contains(para, e.readme) {
			t.Errorf("README.md's Logs paragraph no longer says %q: update noSpaceEvents with it", e.readme)
		}
	}

	const fleetName, parts = "logs-nospace", 8
	cfg := cluster.DefaultConfig()
	cfg.QuotaBackendBytes = 4 << 20
	c := cluster.NewWithConfig(t, cfg)
	cli := c.NewClient(t)
	buf := &testsupport.Buffer{}
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: buf, JSONFormat: true})
	defer func() {
		if t.Failed() {
			t.Log(buf.String())
		}
	}()
	a := join(t, cli, nodeConfig(fleetName, "a", parts, logger))
	b := join(t, cli, nodeConfig(fleetName, "b", parts, logger))
	waitStable(t, a, b)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := cluster.Fill(ctx, cli); err != nil {
		t.Fatal(err)
	}
	closed := make(chan error, 1)
	go func() { closed <- b.Close(ctx) }()
	waitLogged(t, buf, "b", noSpaceEvents[0].msg)
	select {
	case err := <-closed:
		t.Fatalf("b's Close ended under the alarm: %v", err)
	default:
	}
	if err := c.ReclaimSpace(ctx, cli); err != nil {
		t.Fatal(err)
	}
	waitLogged(t, buf, "b", noSpaceEvents[1].msg)
	if err := <-closed; err != nil {
		t.Fatalf("b's Close after the disarm: %v", err)
	}
	waitStable(t, a)

	lines := logLines(t, buf)
	for _, e := range noSpaceEvents {
		l := findLog(lines, "b", e.msg, e.fields...)
		if l == nil {
			t.Errorf("README.md names %q, but b printed no line %q with the fields %v", e.readme, e.msg, e.fields)
			continue
		}
		if p, ok := l["partitions"].(string); ok && !rangesRE.MatchString(p) {
			t.Errorf("%q: partitions %q are not ranges", e.msg, p)
		}
	}
}
