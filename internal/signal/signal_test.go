package signal

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// TestSignal: a channel from Changed is closed by the next Notify and not
// before; a Notify with no channel asked for is lost to later askers, and
// every asker before a Notify shares its close.
func TestSignal(t *testing.T) {
	var s Signal
	s.Notify() // no one asked
	a := s.Changed()
	b := s.Changed()
	assert.False(t, closed(a))
	s.Notify()
	assert.True(t, closed(a))
	assert.True(t, closed(b))
	c := s.Changed()
	assert.False(t, closed(c), "a channel asked for after a Notify waits for the next")
	s.Notify()
	assert.True(t, closed(c))
}
