package ring

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSpecMismatchError(t *testing.T) {
	fleet := DefaultConfig().Spec()
	assert.NoError(t, fleet.Compare(fleet))
	local := fleet
	local.RingAlgorithm = 2
	err := fleet.Compare(local)
	require.ErrorIs(t, err, ErrSpecMismatch)
	assert.Contains(t, err.Error(), "ring algorithm 2 here, 1 in the fleet")
}
