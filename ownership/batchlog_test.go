package ownership

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/sim/cluster"
)

// acquiredLines returns node's "acquired" lines.
func acquiredLines(lines []map[string]any, node string) []map[string]any {
	return findLogs(lines, "acquired ", map[string]any{"node": node})
}

// loggedCount sums the count field of lines.
func loggedCount(lines []map[string]any) int {
	n := 0
	for _, l := range lines {
		if c, ok := l["count"].(float64); ok {
			n += int(c)
		}
	}
	return n
}

// requireLinePerClaimBatch checks lines, node's "acquired" lines, against
// the partitions it serves: one line per claim transaction (one epoch),
// every served partition in exactly one line.
func requireLinePerClaimBatch(t *testing.T, lines []map[string]any, st NodeStatus) {
	t.Helper()
	byEpoch := map[int64][]int{}
	for _, sp := range st.Partitions {
		byEpoch[sp.Epoch] = append(byEpoch[sp.Epoch], sp.Partition)
	}
	require.Len(t, lines, len(byEpoch), "one line per claim transaction: %v", lines)
	for _, l := range lines {
		epochs := fmt.Sprint(l["epochs"])
		require.NotContains(t, epochs, "..", "one claim transaction per line: %v", l)
		var epoch int64
		_, err := fmt.Sscan(epochs, &epoch)
		require.NoError(t, err)
		ps, ok := byEpoch[epoch]
		require.True(t, ok, "a line for epoch %d, which serves nothing: %v", epoch, l)
		assert.Equal(t, partitionRanges(ps), l["partitions"], "epoch %d", epoch)
		assert.Equal(t, float64(len(ps)), l["count"], "epoch %d", epoch)
		delete(byEpoch, epoch)
	}
}

// The partitions one claim transaction acquires are one "acquired" line,
// written once the last of them serves, although a fencer that advances
// each token on its own (an etcd store) lets them start serving one by
// one: at start-up, one line for everything; on a join, one line per
// claim transaction of the joining node.
func TestAcquiredLinePerClaimBatch(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	const P, name = 48, "batchlines"
	store := fleetStore(t, cli, name)
	buf := &testsupport.Buffer{}
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: buf, JSONFormat: true})
	cfg := func(id string) Config {
		cfg := testConfig(t, name, id, P)
		cfg.Fencers = []fence.Fencer{store}
		cfg.Logger = logger
		return cfg
	}

	// Start-up.
	a := join(t, cli, cfg("a"))
	waitStable(t, 20*time.Second, a)
	waitLogged(t, buf, 10*time.Second, func(lines []map[string]any) error {
		if n := loggedCount(acquiredLines(lines, "a")); n != P {
			return fmt.Errorf("a logged %d acquisitions of %d", n, P)
		}
		return nil
	})
	startup := acquiredLines(logLines(t, buf), "a")
	require.Len(t, startup, 1, "one line at start-up")
	requireLinePerClaimBatch(t, startup, a.Status())

	// A join.
	b := join(t, cli, cfg("b"))
	waitStable(t, 20*time.Second, a, b)
	owned := len(b.Owned())
	waitLogged(t, buf, 10*time.Second, func(lines []map[string]any) error {
		if n := loggedCount(acquiredLines(lines, "b")); n != owned {
			return fmt.Errorf("b logged %d acquisitions of %d", n, owned)
		}
		return nil
	})
	joined := acquiredLines(logLines(t, buf), "b")
	requireLinePerClaimBatch(t, joined, b.Status())
	assert.Len(t, acquiredLines(logLines(t, buf), "a"), 1, "a acquired nothing more")
	epochs := map[string]bool{}
	for _, l := range joined {
		epochs[fmt.Sprint(l["epochs"])] = true
	}
	t.Logf("start-up: 1 line for %d partitions; b's join: %d lines for %d partitions (epochs %s)",
		P, len(joined), owned, strings.Join(slices.Sorted(maps.Keys(epochs)), " "))
}
