package fleet_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/sim/cluster"
)

// failingFencer refuses every token while failing is set, as a store that
// cannot be reached would, and signals each refusal on refused.
type failingFencer struct {
	failing atomic.Bool
	refused chan struct{}
}

var errStoreDown = errors.New("test: the store is down")

func (f *failingFencer) Advance(context.Context, fence.Token) error {
	if f.failing.Load() {
		select {
		case f.refused <- struct{}{}:
		default:
		}
		return errStoreDown
	}
	return nil
}

// TestResizeDriverSaysWhyItWaits: node b's fencers fail, so the targets
// it claims in a split are never marked fenced and hold the resize; the
// driver logs why it waits, naming the group, the partition and b, once
// for that reason however long it waits; once b's store is back, the
// resize completes.
func TestResizeDriverSaysWhyItWaits(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	const name = "resize-wait"
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	a := join(t, cli, testConfig(t, name, "a", 4))
	store := &failingFencer{refused: make(chan struct{}, 1)}
	bcfg := testConfig(t, name, "b", 4)
	bcfg.Fencers = []fence.Fencer{store}
	b := join(t, cli, bcfg)
	waitStable(t, 20*time.Second, a, b)
	op, err := fleet.NewOperator(cli, fleet.OperatorConfig{Cluster: name})
	require.NoError(t, err)

	store.failing.Store(true)
	var logs testsupport.Buffer
	done := make(chan error, 1)
	go func() {
		_, err := op.Resize(ctx, 8, fleet.ResizeOptions{Actor: "t", Reason: "a store down",
			Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info, JSONFormat: true})})
		done <- err
	}()
	var wait map[string]any
	for wait == nil {
		for _, l := range jsonLines(t, logs.Bytes()) {
			if l["@message"] == "resize: waiting" && l["holder"] == "b" && wait == nil {
				wait = l
			}
		}
		if wait != nil {
			break
		}
		select {
		case <-logs.Written():
		case err := <-done:
			t.Fatalf("the resize ended (%v) while b's store is down:\n%s", err, logs.String())
		case <-ctx.Done():
			t.Fatalf("no line says the driver waits for b:\n%s", logs.String())
		}
	}
	p, ok := wait["partition"].(float64)
	require.True(t, ok)
	assert.Equal(t, float64(int(p)%4), wait["group"], "the partition's group")
	assert.Contains(t, wait["reason"], "fence", "b holds it unfenced: %v", wait)
	assert.Positive(t, wait["epoch"], "b's claim")

	// However long it waits for b, it says so once: b's store refuses
	// b's retries (each after a backoff of its own) while the driver
	// reads the fleet again and again.
	for range 8 {
		select {
		case <-store.refused:
		case <-ctx.Done():
			t.Fatal("b does not try its store again")
		}
	}
	store.failing.Store(false)
	select {
	case err := <-done:
		require.NoError(t, err)
	case <-ctx.Done():
		t.Fatalf("the resize did not complete:\n%s", logs.String())
	}
	n := 0
	for _, l := range jsonLines(t, logs.Bytes()) {
		if l["@message"] == "resize: waiting" && l["partition"] == wait["partition"] && l["reason"] == wait["reason"] {
			n++
		}
	}
	assert.Equal(t, 1, n, "one line for one reason:\n%s", logs.String())
	waitStable(t, 20*time.Second, a, b)
}

// jsonLines decodes hclog's JSON lines.
func jsonLines(t *testing.T, b []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		if len(line) == 0 {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal(line, &m), "%s", line)
		out = append(out, m)
	}
	return out
}
