package fleetview

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/ownership/ring"
)

// TestSpecStoredForm: a spec is stored with the algorithm as its number,
// the form every build reads and writes; unknown algorithms are refused.
func TestSpecStoredForm(t *testing.T) {
	w := ring.Config{Partitions: 8, LoadFactor: 1.25, Algorithm: ring.AlgorithmWeighted}
	b := ring.Config{Partitions: 8, LoadFactor: 1.25, Algorithm: ring.AlgorithmBounded}
	var err error

	// The stored form: numbers, as older builds wrote (1: bounded) and
	// read them.
	for _, tt := range []struct {
		stored string
		spec   ring.Spec
	}{
		{`{"partitions":8,"load_factor":1.25,"ring_algorithm":1}`, b.Spec()},
		{`{"partitions":8,"load_factor":1.25,"ring_algorithm":2}`, w.Spec()},
	} {
		s, err := DecodeSpec([]byte(tt.stored))
		require.NoError(t, err)
		assert.Equal(t, tt.spec, s)
		enc, err := EncodeSpec(s)
		require.NoError(t, err)
		assert.JSONEq(t, tt.stored, string(enc))
	}
	for _, bad := range []string{
		`{"partitions":8,"load_factor":1.25,"ring_algorithm":3}`,
		`{"partitions":8,"load_factor":1.25,"ring_algorithm":0}`,
		`{"partitions":8,"load_factor":1.25}`,
		`{"partitions":8,"load_factor":1.25,"ring_algorithm":"weighted"}`,
	} {
		_, err = DecodeSpec([]byte(bad))
		assert.ErrorIs(t, err, ring.ErrInvalidSpec, bad)
	}
	_, err = EncodeSpec(ring.Spec{Partitions: 8, LoadFactor: 1.25})
	assert.ErrorIs(t, err, ring.ErrInvalidSpec, "no spec without an algorithm is stored")
}
