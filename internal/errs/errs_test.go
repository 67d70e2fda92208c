package errs

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
)

var (
	errInner = errors.New("election: invalid config")
	errOuter = errors.New("ownership: invalid config")
	errRing  = errors.New("ring: invalid config")
	errCause = errors.New("root cause")
)

func TestNest(t *testing.T) {
	inner := fmt.Errorf("%w: TTL %v must be at least %v", errInner, "1s", "2s")
	outer := Nest(errOuter, "session", inner)
	assert.Equal(t, "ownership: invalid config: session: TTL 1s must be at least 2s", outer.Error())
	assert.ErrorIs(t, outer, errOuter)
	assert.ErrorIs(t, outer, errInner)

	// Nested twice, each prefix once.
	twice := Nest(errRing, "node", outer)
	assert.Equal(t, "ring: invalid config: node: session: TTL 1s must be at least 2s", twice.Error())
	assert.ErrorIs(t, twice, errInner)

	// A wrapper with words before the sentinel keeps them; a plain error
	// its message.
	wrapped := fmt.Errorf("context: %w", inner)
	assert.Equal(t, "ownership: invalid config: session: context: election: invalid config: TTL 1s must be at least 2s", Nest(errOuter, "session", wrapped).Error())
	plain := Nest(errOuter, "", errCause)
	assert.Equal(t, "ownership: invalid config: root cause", plain.Error())
	assert.ErrorIs(t, plain, errCause)
}
