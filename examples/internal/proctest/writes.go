package proctest

import (
	"context"
	"fmt"
	"sync"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// Writes counts the etcd revisions that wrote under a prefix (a fleet's:
// claims, resize keys, spec, placements, members, audit records), from a
// watch.
type Writes struct {
	cli  *clientv3.Client
	mu   sync.Mutex
	revs map[int64]bool
	seen int64 // the watch has delivered every revision up to this one
}

// WatchWrites starts counting the writes under prefix from now; the
// watch ends with the test.
func WatchWrites(t *testing.T, cli *clientv3.Client, prefix string) *Writes {
	t.Helper()
	w := &Writes{cli: cli, revs: map[int64]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	wch := cli.Watch(ctx, prefix, clientv3.WithPrefix())
	done := make(chan struct{})
	t.Cleanup(func() { cancel(); <-done })
	go func() {
		defer close(done)
		for resp := range wch {
			w.mu.Lock()
			for _, ev := range resp.Events {
				w.revs[ev.Kv.ModRevision] = true
			}
			w.seen = max(w.seen, resp.Header.Revision)
			w.mu.Unlock()
		}
	}()
	return w
}

// Revision returns etcd's current revision.
func (w *Writes) Revision(t *testing.T) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Wait)
	defer cancel()
	resp, err := w.cli.Get(ctx, "proctest-revision")
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Revision
}

// Between returns the number of revisions in (a, b] that wrote under the
// prefix, once the watch has delivered revision b (a progress request
// makes it say so).
func (w *Writes) Between(t *testing.T, a, b int64) int {
	t.Helper()
	WaitFor(t, fmt.Sprintf("the watch of the writes at revision %d", b), func() bool {
		w.mu.Lock()
		seen := w.seen
		w.mu.Unlock()
		if seen < b {
			_ = w.cli.RequestProgress(context.Background())
		}
		return seen >= b
	})
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for r := range w.revs {
		if r > a && r <= b {
			n++
		}
	}
	return n
}
