package fleet_test

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestTraceResize: a real resize of a serving fleet (4 to 8 partitions,
// one group at a time) is one span, with a child span for each step it
// wrote, in order: start, groups asked to move, complete.
func TestTraceResize(t *testing.T) {
	c := cluster.New(t, 1)
	f := newResizeFleet(t, c, "traceresize", 4, "a", "b")
	tp, exp := testsupport.Tracing(t)
	op, err := fleet.NewOperator(f.obsClient, fleet.OperatorConfig{Cluster: f.name, TracerProvider: tp})
	require.NoError(t, err)
	rep, err := op.Resize(opCtx(t), 8, fleet.ResizeOptions{Actor: "t", Reason: "trace", Budget: 1})
	require.NoError(t, err)
	require.True(t, rep.Completed)

	var root tracetest.SpanStub
	var steps []string
	for _, s := range exp.GetSpans() {
		if s.Name == "tenure.resize" {
			root = s
		}
	}
	require.Equal(t, "tenure.resize", root.Name)
	for _, s := range exp.GetSpans() {
		if s.Name != "tenure.resize.step" {
			continue
		}
		assert.Equal(t, root.SpanContext.SpanID(), s.Parent.SpanID())
		for _, a := range s.Attributes {
			if a.Key == "tenure.resize.step" {
				steps = append(steps, a.Value.AsString())
			}
		}
	}
	require.NotEmpty(t, steps)
	assert.Equal(t, "start", steps[0])
	assert.Equal(t, "complete", steps[len(steps)-1])
	moving := slices.DeleteFunc(slices.Clone(steps[1:len(steps)-1]), func(s string) bool { return s == "moving" })
	assert.Empty(t, moving, "between start and complete, only groups asked to move")
	assert.GreaterOrEqual(t, len(steps), 2+4, "the four groups asked one at a time (budget 1)")
	t.Logf("steps: %v", steps)
}
