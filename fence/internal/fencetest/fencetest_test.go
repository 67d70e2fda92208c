package fencetest_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/internal/fencetest"
)

// recorder is a testing.TB that records failures instead of failing.
type recorder struct {
	testing.TB
	mu     sync.Mutex
	errors []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) Helper() {}

var cfg = fencetest.Config{Goroutines: 16, PerWriter: 20, Scopes: 3, Seed: 1}

// A Gate is a correct store: its commit order, kept under its lock, passes.
func TestGatePasses(t *testing.T) {
	var g fence.Gate
	var mu sync.Mutex
	var seq int64
	accepted, refused := fencetest.Interleave(t, cfg, func(_, _ int, tok fence.Token, _ string) (int64, error) {
		var n int64
		err := g.Do(tok, func() error {
			mu.Lock()
			defer mu.Unlock()
			seq++
			n = seq
			return nil
		})
		return n, err
	})
	assert.Positive(t, refused)
	fencetest.CheckOrder(t, accepted)
}

// A store that accepts everything is caught, by Interleave (no refusals) and
// by CheckOrder (epochs decrease).
func TestUnfencedStoreFails(t *testing.T) {
	r := &recorder{TB: t}
	var mu sync.Mutex
	var seq int64
	accepted, refused := fencetest.Interleave(r, cfg, func(_, _ int, _ fence.Token, _ string) (int64, error) {
		mu.Lock()
		defer mu.Unlock()
		seq++
		return seq, nil
	})
	assert.Zero(t, refused)
	assert.Len(t, r.errors, 1, "no refusals is reported")
	fencetest.CheckOrder(r, accepted)
	assert.Greater(t, len(r.errors), 1, "decreasing epochs are reported")
}

// A refusal that is not a stale error with a newer current epoch is a
// failure.
func TestBadRefusalFails(t *testing.T) {
	r := &recorder{TB: t}
	fencetest.Interleave(r, fencetest.Config{Goroutines: 1, PerWriter: 1, Scopes: 1}, func(_, _ int, tok fence.Token, _ string) (int64, error) {
		return 0, &fence.StaleError{Scope: tok.Scope, Presented: tok.Epoch, Current: tok.Epoch}
	})
	assert.NotEmpty(t, r.errors)
}
