package fence_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/tenure-go/tenure/fence"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestTokenRoundTrip(t *testing.T) {
	for _, tok := range []fence.Token{
		{Scope: "p/17", Epoch: 1},
		{Scope: "leader/billing", Epoch: 9223372036854775807},
		{Scope: "a@b@c", Epoch: 42},
		{Scope: "ключ", Epoch: 7},
	} {
		got, err := fence.ParseToken(tok.String())
		require.NoError(t, err, tok.String())
		assert.Equal(t, tok, got)
	}
}

func TestParseTokenRejects(t *testing.T) {
	for _, s := range []string{
		"", "@", "p/1", "p/1@", "@5", "p/1@0", "p/1@-3", "p/1@+3", "p/1@007",
		"p/1@12a", "p/1@9223372036854775808", "p 1@3", "p/1\x00@3", "\xff@3",
		strings.Repeat("x", fence.MaxScopeLen+1) + "@1",
	} {
		_, err := fence.ParseToken(s)
		require.Error(t, err, "%q", s)
		assert.ErrorIs(t, err, fence.ErrInvalidToken, "%q", s)
		assert.Equal(t, 1, strings.Count(err.Error(), "fence:"), "one prefix: %v", err)
	}
}

func TestTokenValidate(t *testing.T) {
	tests := []struct {
		name string
		tok  fence.Token
		ok   bool
	}{
		{"valid", fence.Token{Scope: "p/1", Epoch: 1}, true},
		{"empty scope", fence.Token{Epoch: 1}, false},
		{"zero epoch", fence.Token{Scope: "p/1"}, false},
		{"negative epoch", fence.Token{Scope: "p/1", Epoch: -1}, false},
		{"control char", fence.Token{Scope: "p/\n1", Epoch: 1}, false},
		{"too long", fence.Token{Scope: strings.Repeat("s", fence.MaxScopeLen+1), Epoch: 1}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.tok.Validate()
			if tt.ok {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, fence.ErrInvalidToken)
			var g fence.Gate
			assert.ErrorIs(t, g.Advance(context.Background(), tt.tok), fence.ErrInvalidToken)
		})
	}
}

func TestCompare(t *testing.T) {
	a := fence.Token{Scope: "p/1", Epoch: 5}
	b := fence.Token{Scope: "p/1", Epoch: 9}
	assert.Equal(t, -1, a.Compare(b))
	assert.Equal(t, 1, b.Compare(a))
	assert.Equal(t, 0, a.Compare(a))
	assert.Equal(t, "p/3", fence.PartitionScope(3))
	assert.Equal(t, "leader/x", fence.LeaderScope("x"))
}

func TestContext(t *testing.T) {
	ctx := context.Background()
	_, ok := fence.FromContext(ctx)
	assert.False(t, ok)
	tok := fence.Token{Scope: "p/1", Epoch: 3}
	got, ok := fence.FromContext(fence.NewContext(ctx, tok))
	require.True(t, ok)
	assert.Equal(t, tok, got)
}

func TestGateAdvanceRule(t *testing.T) {
	var g fence.Gate
	require.NoError(t, g.Advance(context.Background(), fence.Token{Scope: "p/1", Epoch: 10}))
	require.NoError(t, g.Advance(context.Background(), fence.Token{Scope: "p/1", Epoch: 10}), "equal epoch is the same owner")
	require.NoError(t, g.Advance(context.Background(), fence.Token{Scope: "p/1", Epoch: 11}))
	err := g.Advance(context.Background(), fence.Token{Scope: "p/1", Epoch: 10})
	require.ErrorIs(t, err, fence.ErrStale)
	var se *fence.StaleError
	require.True(t, errors.As(err, &se))
	assert.Equal(t, fence.StaleError{Scope: "p/1", Presented: 10, Current: 11}, *se)
	assert.Contains(t, err.Error(), "epoch 10 < current epoch 11")
	require.NoError(t, g.Advance(context.Background(), fence.Token{Scope: "p/2", Epoch: 1}), "scopes are independent")
	assert.Equal(t, int64(11), g.Floor("p/1"))
	assert.ErrorIs(t, g.Check(fence.Token{Scope: "p/1", Epoch: 3}), fence.ErrStale)
	assert.NoError(t, g.Check(fence.Token{Scope: "p/1", Epoch: 12}))
	assert.Equal(t, int64(11), g.Floor("p/1"), "Check does not record")

	ran := false
	err = g.Do(fence.Token{Scope: "p/1", Epoch: 9}, func() error { ran = true; return nil })
	assert.ErrorIs(t, err, fence.ErrStale)
	assert.False(t, ran, "a stale token's write must not run")
}

// TestGateConcurrent has 16 goroutines present interleaved epochs for a few
// scopes. Inside Do each admitted write appends its epoch to the scope's log;
// the log, which is the store's own commit order, must never decrease, and
// every rejection must be justified by a newer epoch already in the log.
func TestGateConcurrent(t *testing.T) {
	var g fence.Gate
	const goroutines, writes, scopes = 16, 2000, 4
	logs := make([][]int64, scopes) // guarded by g's lock through Do
	var wg sync.WaitGroup
	for w := range goroutines {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 7))
			for i := range writes {
				s := rng.IntN(scopes)
				epoch := int64(i/50 + 1 + rng.IntN(3))
				tok := fence.Token{Scope: fence.PartitionScope(s), Epoch: epoch}
				err := g.Do(tok, func() error {
					logs[s] = append(logs[s], epoch)
					return nil
				})
				if err != nil {
					var se *fence.StaleError
					if !errors.As(err, &se) || se.Current <= epoch {
						panic(fmt.Sprintf("unjustified rejection: %v", err))
					}
				}
			}
		})
	}
	wg.Wait()
	total := 0
	for s, log := range logs {
		total += len(log)
		for i := 1; i < len(log); i++ {
			require.LessOrEqual(t, log[i-1], log[i], "scope %d: admitted epochs decreased at %d", s, i)
		}
		if len(log) > 0 {
			assert.Equal(t, log[len(log)-1], g.Floor(fence.PartitionScope(s)))
		}
	}
	assert.Greater(t, total, goroutines*writes/100, "too few writes admitted to mean anything")
	assert.Less(t, total, goroutines*writes, "no write was rejected: the interleaving tested nothing")
}

func FuzzParseToken(f *testing.F) {
	for _, s := range []string{"p/1@1", "leader/x@99", "@", "a@b@3", "p/1@007", "", "x@-1", "\xff@1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok, err := fence.ParseToken(s)
		if err != nil {
			if !errors.Is(err, fence.ErrInvalidToken) {
				t.Fatalf("ParseToken(%q): error %v does not wrap ErrInvalidToken", s, err)
			}
			return
		}
		if tok.Validate() != nil {
			t.Fatalf("ParseToken(%q) returned invalid token %+v", s, tok)
		}
		if tok.String() != s {
			t.Fatalf("round trip: %q -> %+v -> %q", s, tok, tok.String())
		}
		back, err := fence.ParseToken(tok.String())
		if err != nil || back != tok {
			t.Fatalf("re-parse of %q: %+v, %v", tok.String(), back, err)
		}
	})
}

func ExampleGate() {
	var g fence.Gate
	ctx := context.Background()
	old := fence.Token{Scope: "p/7", Epoch: 100}
	next := fence.Token{Scope: "p/7", Epoch: 250}

	fmt.Println(g.Advance(ctx, old))  // the first owner writes
	fmt.Println(g.Advance(ctx, next)) // its successor writes
	err := g.Advance(ctx, old)        // the first owner wakes from a pause
	fmt.Println(errors.Is(err, fence.ErrStale), err)
	// Output:
	// <nil>
	// <nil>
	// true fence: stale token for scope "p/7": epoch 100 < current epoch 250
}

func ExampleParseToken() {
	tok, err := fence.ParseToken("leader/billing@4711")
	fmt.Println(tok.Scope, tok.Epoch, err)
	// Output: leader/billing 4711 <nil>
}

// TestNilArguments: a nil Gate and a nil FencerFunc return ErrNilArgument
// instead of panicking.
func TestNilArguments(t *testing.T) {
	var err error
	require.NotPanics(t, func() { err = (*fence.Gate)(nil).Advance(context.Background(), fence.Token{Scope: "p/1", Epoch: 1}) })
	assert.ErrorIs(t, err, fence.ErrNilArgument)
	require.NotPanics(t, func() { err = fence.FencerFunc(nil).Advance(context.Background(), fence.Token{Scope: "p/1", Epoch: 1}) })
	assert.ErrorIs(t, err, fence.ErrNilArgument)
	assert.Equal(t, 1, strings.Count(err.Error(), "fence:"), "one prefix: %v", err)

	var g fence.Gate
	var f fence.Fencer = &g
	require.NoError(t, f.Advance(context.Background(), fence.Token{Scope: "p/1", Epoch: 4}))
	assert.Equal(t, int64(4), g.Floor("p/1"), "a Gate is a Fencer")
	assert.ErrorIs(t, f.Advance(context.Background(), fence.Token{Scope: "p/1", Epoch: 3}), fence.ErrStale)
}
