package cluster

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestPortsBelowEphemeralRange: members' ports are distinct and, where
// the kernel's ephemeral range is known, below it, so that no outgoing
// connection of any process can take a stopped member's port before it
// restarts.
func TestPortsBelowEphemeralRange(t *testing.T) {
	ports, err := freePorts(12)
	require.NoError(t, err)
	seen := map[int]bool{}
	for _, p := range ports {
		assert.False(t, seen[p], "port %d twice", p)
		seen[p] = true
	}
	below, ok := ephemeralFloor()
	if !ok || below <= memberPortFloor {
		t.Skip("the kernel's ephemeral port range is unknown here")
	}
	for _, p := range ports {
		assert.GreaterOrEqual(t, p, memberPortFloor)
		assert.Less(t, p, below, "port %d is in the ephemeral range from %d", p, below)
	}
}
