package sqlfence

// Queued returns the number of writes waiting in b's queue (those whose
// callers have gone included), for tests that wait until writes queue.
func Queued[W, R any](b *Batcher[W, R]) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.queue)
}
