package ring

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSpecMismatchError(t *testing.T) {
	fleet := DefaultConfig().Spec()
	assert.NoError(t, fleet.compare(fleet))
	local := fleet
	local.RingAlgorithm = AlgorithmBounded
	err := fleet.compare(local)
	require.ErrorIs(t, err, ErrSpecMismatch)
	assert.Contains(t, err.Error(), "ring algorithm bounded here, weighted in the fleet")
}

// TestSpecAlgorithm: a spec records the algorithm; an unset Algorithm is
// AlgorithmWeighted in a new spec and adopts the fleet's against a stored
// one; a spec is reported by the algorithm's name. (Its stored form is
// fleetview's, tested there by TestSpecStoredForm.)
func TestSpecAlgorithm(t *testing.T) {
	w := Config{Partitions: 8, LoadFactor: 1.25, Algorithm: AlgorithmWeighted}
	assert.Equal(t, AlgorithmWeighted, w.Spec().RingAlgorithm)
	assert.Equal(t, w, w.Spec().Config())
	b := Config{Partitions: 8, LoadFactor: 1.25, Algorithm: AlgorithmBounded}
	assert.Equal(t, AlgorithmBounded, b.Spec().RingAlgorithm)
	assert.Equal(t, b, b.Spec().Config())
	unset := Config{Partitions: 8, LoadFactor: 1.25}
	assert.Equal(t, w.Spec(), unset.Spec(), "a new fleet is weighted")
	assert.ErrorIs(t, b.Spec().compare(w.Spec()), ErrSpecMismatch)

	// Against a stored spec, unset adopts; an explicit other one is refused.
	for _, fleet := range []Spec{b.Spec(), w.Spec()} {
		assert.NoError(t, fleet.CompareConfig(unset), "%v", fleet.RingAlgorithm)
		assert.NoError(t, fleet.CompareConfig(fleet.Config()))
	}
	err := b.Spec().CompareConfig(w)
	require.ErrorIs(t, err, ErrSpecMismatch)
	assert.Contains(t, err.Error(), "ring algorithm weighted here, bounded in the fleet")
	unset.Partitions = 16
	var mismatch *SpecMismatchError
	require.ErrorAs(t, b.Spec().CompareConfig(unset), &mismatch)
	assert.Equal(t, "partitions", mismatch.Field)

	// Reports name the algorithm.
	rep, err := json.Marshal(w.Spec())
	require.NoError(t, err)
	assert.JSONEq(t, `{"partitions":8,"load_factor":1.25,"ring_algorithm":"weighted"}`, string(rep))
	var back Spec
	require.NoError(t, json.Unmarshal(rep, &back))
	assert.Equal(t, w.Spec(), back)
}

// TestAlgorithmNames: every algorithm has one name, in String and in its
// text form; unknown names and numbers are refused.
func TestAlgorithmNames(t *testing.T) {
	for a, name := range map[Algorithm]string{AlgorithmBounded: "bounded", AlgorithmWeighted: "weighted"} {
		assert.Equal(t, name, a.String())
		text, err := a.MarshalText()
		require.NoError(t, err)
		assert.Equal(t, name, string(text))
		var back Algorithm
		require.NoError(t, back.UnmarshalText(text))
		assert.Equal(t, a, back)
	}
	assert.Equal(t, "unset", Algorithm(0).String())
	assert.Equal(t, "Algorithm(7)", Algorithm(7).String())
	text, err := Algorithm(0).MarshalText()
	require.NoError(t, err)
	assert.Empty(t, text)
	_, err = Algorithm(7).MarshalText()
	assert.ErrorIs(t, err, ErrInvalidAlgorithm)
	var a Algorithm
	assert.ErrorIs(t, a.UnmarshalText([]byte("count-only")), ErrInvalidAlgorithm)
	assert.ErrorIs(t, a.UnmarshalText([]byte("2")), ErrInvalidAlgorithm)
	require.NoError(t, a.UnmarshalText(nil))
	assert.Zero(t, a)
}
