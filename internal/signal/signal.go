// Package signal holds the change signal that tenure's views hand out to
// their readers: a channel closed at the next change, which a reader that
// waits for a condition takes before it looks, so that no change after
// its look is missed.
package signal

import "sync"

// Signal is a change signal. Its zero value is ready to use; a Signal
// must not be copied after first use. It is safe for concurrent use by
// multiple goroutines.
type Signal struct {
	mu   sync.Mutex
	next chan struct{} // closed at the next Notify; nil until asked for
}

// Changed returns a channel that is closed at the next Notify.
func (s *Signal) Changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next == nil {
		s.next = make(chan struct{})
	}
	return s.next
}

// Notify reports a change: it closes the channel Changed returned, if
// any. Call it after the change is visible to readers.
func (s *Signal) Notify() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next != nil {
		close(s.next)
		s.next = nil
	}
}
