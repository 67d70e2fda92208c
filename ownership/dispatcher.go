package ownership

import "sync"

// dispatcher runs callbacks one at a time, in the order they were queued,
// on its own goroutine. Its queue is unbounded, so queueing never blocks.
type dispatcher struct {
	mu      sync.Mutex
	queue   []func()
	closing bool
	wake    chan struct{} // capacity 1
	done    chan struct{}
}

func newDispatcher() *dispatcher {
	return &dispatcher{wake: make(chan struct{}, 1), done: make(chan struct{})}
}

// enqueue queues f. After close, f still runs if the dispatcher has not yet
// finished.
func (d *dispatcher) enqueue(f func()) {
	d.mu.Lock()
	d.queue = append(d.queue, f)
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// close makes run return once the queue is empty.
func (d *dispatcher) close() {
	d.mu.Lock()
	d.closing = true
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *dispatcher) run() {
	defer close(d.done)
	var batch []func()
	for {
		d.mu.Lock()
		for len(d.queue) == 0 {
			if d.closing {
				d.mu.Unlock()
				return
			}
			d.mu.Unlock()
			<-d.wake
			d.mu.Lock()
		}
		batch, d.queue = d.queue, batch[:0]
		d.mu.Unlock()
		for i, f := range batch {
			f()
			batch[i] = nil
		}
	}
}
