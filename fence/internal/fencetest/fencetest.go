// Package fencetest drives fenced stores the same way in the tests of every
// store: many goroutines writing under interleaved epochs, and a check of
// the order in which the store committed what it accepted.
package fencetest

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
)

// Config sizes Interleave.
type Config struct {
	// Goroutines write concurrently, PerWriter writes each.
	Goroutines, PerWriter int
	// Scopes is the number of partition scopes written ("p/0", "p/1", ...).
	Scopes int
	// Seed varies the sequence of scopes and epochs.
	Seed uint64
}

// Write is one write made by Interleave.
type Write struct {
	// ID names the write uniquely: "g<goroutine>-<index>".
	ID string
	// Token is the token the write was made under.
	Token fence.Token
	// Seq is the write's position in the store's commit order, as the write
	// function reported it (for accepted writes).
	Seq int64
}

// WriteFunc makes one write under tok, and returns the write's position in
// the store's commit order (any number that increases with it, or 0 if the
// store's order is read back otherwise) or the store's error.
type WriteFunc func(g, i int, tok fence.Token, id string) (seq int64, err error)

// Interleave runs cfg.Goroutines goroutines making cfg.PerWriter writes each
// with write, under tokens whose epochs interleave as owners' would: a
// fifth take a scope over with a new epoch, two fifths continue under the
// newest one, and the rest present an epoch up to two older, possibly
// superseded. It fails t if a write fails for a reason other than a
// *fence.StaleError whose presented epoch is below its current one, or if
// no write was refused, and returns the accepted writes and the number
// refused.
func Interleave(t testing.TB, cfg Config, write WriteFunc) (accepted []Write, refused int) {
	t.Helper()
	latest := make([]atomic.Int64, cfg.Scopes) // newest epoch handed out per scope
	for i := range latest {
		latest[i].Store(1)
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for g := range cfg.Goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), cfg.Seed))
			for i := range cfg.PerWriter {
				sc := rng.IntN(cfg.Scopes)
				var e int64
				switch r := rng.IntN(10); {
				case r < 2: // a new owner takes over
					e = latest[sc].Add(1)
				case r < 6: // the current owner continues
					e = latest[sc].Load()
				default: // an older owner, possibly superseded
					e = max(1, latest[sc].Load()-int64(rng.IntN(3)))
				}
				tok := fence.Token{Scope: fence.PartitionScope(sc), Epoch: e}
				id := fmt.Sprintf("g%d-%d", g, i)
				seq, err := write(g, i, tok, id)
				var se *fence.StaleError
				mu.Lock()
				switch {
				case err == nil:
					accepted = append(accepted, Write{ID: id, Token: tok, Seq: seq})
				case errors.As(err, &se) && se.Presented < se.Current:
					refused++
				default:
					t.Errorf("write %s under %s: %v", id, tok, err)
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(accepted) == 0 || refused == 0 {
		t.Errorf("the interleaving produced %d accepted and %d refused writes; want some of each", len(accepted), refused)
	}
	if len(accepted)+refused != cfg.Goroutines*cfg.PerWriter {
		t.Errorf("%d accepted + %d refused writes, want %d", len(accepted), refused, cfg.Goroutines*cfg.PerWriter)
	}
	return accepted, refused
}

// CheckOrder sorts the accepted writes of every scope by Seq, checks that
// no two share one and that their epochs never decrease in that order, and
// returns them by scope.
func CheckOrder(t testing.TB, accepted []Write) map[string][]Write {
	t.Helper()
	byScope := map[string][]Write{}
	for _, w := range accepted {
		byScope[w.Token.Scope] = append(byScope[w.Token.Scope], w)
	}
	for scope, ws := range byScope {
		slices.SortFunc(ws, func(a, b Write) int { return cmp.Compare(a.Seq, b.Seq) })
		for i := 1; i < len(ws); i++ {
			if ws[i].Seq == ws[i-1].Seq {
				t.Errorf("scope %s: writes %s and %s share position %d", scope, ws[i-1].ID, ws[i].ID, ws[i].Seq)
			}
			if ws[i].Token.Epoch < ws[i-1].Token.Epoch {
				t.Errorf("scope %s: epoch %d (%s) committed after epoch %d (%s)", scope,
					ws[i].Token.Epoch, ws[i].ID, ws[i-1].Token.Epoch, ws[i-1].ID)
			}
		}
	}
	return byScope
}

// RequireStale fails t at once unless err is a *fence.StaleError
// (errors.Is fence.ErrStale) with exactly these fields.
func RequireStale(t testing.TB, err error, scope string, presented, current int64) {
	t.Helper()
	require.Error(t, err)
	require.True(t, errors.Is(err, fence.ErrStale), "not ErrStale: %v", err)
	var se *fence.StaleError
	require.True(t, errors.As(err, &se), "not a *fence.StaleError: %T %v", err, err)
	require.Equal(t, fence.StaleError{Scope: scope, Presented: presented, Current: current}, *se)
}

// Context returns a context that bounds one test generously (a minute) and
// is cancelled when the test ends.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}
