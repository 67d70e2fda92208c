package fleetview

import (
	"fmt"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership/ring"
)

// TestShapeRule: during a resize a key follows the target count once its
// group is done and the source count before; the partitions a group's
// change replaced are its sources (done) or its targets (moved back),
// at the revision of the change.
func TestShapeRule(t *testing.T) {
	for _, tc := range []struct{ from, to int }{{4, 16}, {16, 4}} {
		t.Run(fmt.Sprintf("%d-%d", tc.from, tc.to), func(t *testing.T) {
			rs := &keys.Resize{ID: "r", From: tc.from, To: tc.to, Budget: 1}
			s := NewShape(tc.from, 1).WithResize(rs)
			s = s.with(func(c *Shape) { c.Done[1] = 50 })
			for i := range 200 {
				key := fmt.Sprintf("k%d", i)
				want := ring.PartitionOf(key, tc.from)
				if ring.PartitionOf(key, 4)%4 == 1 {
					want = ring.PartitionOf(key, tc.to)
				}
				require.Equal(t, want, s.Of(key), key)
				require.True(t, s.Active(s.Of(key)), key)
			}
			srcs, tgts := s.Sources(1), s.Targets(1)
			for _, p := range tgts {
				got, rev := s.Replaced(p)
				assert.Equal(t, srcs, got)
				assert.Equal(t, int64(50), rev)
			}
			for _, p := range s.Sources(2) {
				got, rev := s.Replaced(p)
				assert.Empty(t, got)
				assert.Zero(t, rev)
			}
			ab := *rs
			ab.Aborting = true
			back := s.with(func(c *Shape) { c.Resize = &ab; delete(c.Done, 1); c.Back[1] = 70 })
			for _, p := range srcs {
				got, rev := back.Replaced(p)
				assert.Equal(t, tgts, got)
				assert.Equal(t, int64(70), rev)
			}
			assert.True(t, back.Aborting())
			assert.False(t, back.Settled(), "moved back, not fenced")
			assert.True(t, back.with(func(c *Shape) { c.Fenced[1] = true }).Settled())
		})
	}
}

// TestShapeIgnoresUndecodableRecord: a resize record put that did not
// decode leaves the shape as it was.
func TestShapeIgnoresUndecodableRecord(t *testing.T) {
	f := NewState(ring.Config{Partitions: 4, LoadFactor: 1.25}, hclog.NewNullLogger())
	before := f.Shape
	f.Apply(Update{Rev: 9, Events: []Event{{Rev: 9, Put: true, Resize: &ResizeEvent{Key: keys.ResizeKey{ID: "x", Record: true}}}}})
	assert.Same(t, before, f.Shape)
	assert.Nil(t, f.Shape.Resize)
}
