// Logs: Buffer is a log sink for tests that read back what a component
// logged while it still runs.

package testsupport

import (
	"bytes"
	"sync"

	"github.com/tenure-go/tenure/internal/signal"
)

// Buffer is a bytes.Buffer safe for concurrent use: an io.Writer for
// loggers whose output a test reads while they write.
type Buffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	written signal.Signal // notified by every Write
}

// Write appends p.
func (s *Buffer) Write(p []byte) (int, error) {
	defer s.written.Notify()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

// Written returns a channel that is closed by the next Write: a test that
// waits for a line re-reads the buffer each time it fires.
func (s *Buffer) Written() <-chan struct{} { return s.written.Changed() }

// Bytes returns a copy of everything written so far.
func (s *Buffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

// String returns everything written so far.
func (s *Buffer) String() string { return string(s.Bytes()) }
