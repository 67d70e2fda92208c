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
	errCause = errors.New("root cause")
)

func TestNest(t *testing.T) {
	inner := New(errInner, "TTL %v must be at least %v", "1s", "2s")
	assert.Equal(t, "election: invalid config: TTL 1s must be at least 2s", inner.Error())
	assert.ErrorIs(t, inner, errInner)

	outer := Nest(errOuter, "session", inner)
	assert.Equal(t, "ownership: invalid config: session: TTL 1s must be at least 2s", outer.Error())
	assert.ErrorIs(t, outer, errOuter)
	assert.ErrorIs(t, outer, errInner)
	var e *Error
	assert.ErrorAs(t, outer, &e)

	// A wrapped *Error keeps its wrapper's words; a plain error its message.
	wrapped := fmt.Errorf("context: %w", inner)
	assert.Equal(t, "ownership: invalid config: session: context: election: invalid config: TTL 1s must be at least 2s", Nest(errOuter, "session", wrapped).Error())
	plain := Nest(errOuter, "", errCause)
	assert.Equal(t, "ownership: invalid config: root cause", plain.Error())
	assert.ErrorIs(t, plain, errCause)
}
