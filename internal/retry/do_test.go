package retry_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/internal/retry"
	"github.com/tenure-go/tenure/internal/testsupport"
)

func TestMain(m *testing.M) { testsupport.VerifyTestMain(m) }

// fixed is a policy without jitter, so that its delays are exact.
var fixed = retry.Policy{MaxAttempts: retry.Unbounded, Initial: 10 * time.Millisecond, Max: 40 * time.Millisecond, Jitter: 1e-12}

// attempts runs retry.Do on a fake clock with an op that reports each
// attempt's number on the returned channel and then does what the test
// sends back.
type attempts struct {
	fc   *clockwork.FakeClock
	seen chan int
	next chan result
	done chan error
}

type result struct {
	done bool
	err  error
}

func start(ctx context.Context, p retry.Policy) *attempts {
	a := &attempts{fc: clockwork.NewFakeClock(), seen: make(chan int), next: make(chan result), done: make(chan error, 1)}
	go func() {
		a.done <- retry.Do(ctx, a.fc, p, func(attempt int) (bool, error) {
			a.seen <- attempt
			r := <-a.next
			return r.done, r.err
		})
	}()
	return a
}

// expect waits for the attempt numbered want and answers it with r.
func (a *attempts) expect(t *testing.T, want int, r result) {
	t.Helper()
	assert.Equal(t, want, <-a.seen)
	a.next <- r
}

// wait lets the clock run the delay d of the retry that Do waits for.
func (a *attempts) wait(t *testing.T, d time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, a.fc.BlockUntilContext(ctx, 1), "Do waits on the clock")
	a.fc.Advance(d)
}

// TestDo: failures are retried after the policy's delays on the given
// clock, progress resets the count, and a done attempt ends the loop with
// its error.
func TestDo(t *testing.T) {
	boom := errors.New("boom")
	a := start(context.Background(), fixed)
	a.expect(t, 1, result{err: boom})
	a.wait(t, 10*time.Millisecond)
	a.expect(t, 2, result{err: boom})
	a.wait(t, 20*time.Millisecond)
	a.expect(t, 3, result{err: boom})
	a.wait(t, 40*time.Millisecond)
	a.expect(t, 4, result{err: boom})
	a.wait(t, 40*time.Millisecond) // capped at Max
	a.expect(t, 5, result{})       // progress: again at once, from 1
	a.expect(t, 1, result{err: boom})
	a.wait(t, 10*time.Millisecond)
	a.expect(t, 2, result{done: true, err: boom})
	assert.ErrorIs(t, <-a.done, boom)

	a = start(context.Background(), fixed)
	a.expect(t, 1, result{done: true})
	assert.NoError(t, <-a.done)
}

// TestDoExhausted: a bounded policy ends the loop after its last attempt
// with an error that wraps ErrExhausted and the last failure.
func TestDoExhausted(t *testing.T) {
	boom := errors.New("boom")
	p := fixed
	p.MaxAttempts = 2
	a := start(context.Background(), p)
	a.expect(t, 1, result{err: boom})
	a.wait(t, 10*time.Millisecond)
	a.expect(t, 2, result{err: boom})
	err := <-a.done
	assert.ErrorIs(t, err, retry.ErrExhausted)
	assert.ErrorIs(t, err, boom)
}

// TestDoContext: a context that ends while Do waits ends it with the
// context's error; an ended context runs no attempt.
func TestDoContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	a := start(ctx, fixed)
	a.expect(t, 1, result{err: errors.New("boom")})
	wctx, wcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer wcancel()
	require.NoError(t, a.fc.BlockUntilContext(wctx, 1))
	cancel()
	assert.ErrorIs(t, <-a.done, context.Canceled)

	err := retry.Do(ctx, clockwork.NewFakeClock(), fixed, func(int) (bool, error) {
		t.Error("an attempt ran after ctx ended")
		return true, nil
	})
	assert.ErrorIs(t, err, context.Canceled)
}
