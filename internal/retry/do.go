package retry

import (
	"context"
	"errors"
	"fmt"

	"github.com/jonboulle/clockwork"
)

// ErrExhausted reports that every attempt a bounded policy allows failed.
var ErrExhausted = errors.New("retries exhausted")

// Do is tenure's retry loop. It runs op until op reports done, ctx ends,
// or p's MaxAttempts failures in a row are spent, and waits on c between
// failures as p describes. op's result says what happened:
//
//   - done: Do returns err at once (nil for a success);
//   - not done, err != nil: the attempt failed; Do waits p's delay for
//     this failure in a row and runs op again;
//   - not done, err == nil: op made progress (a watch that delivered
//     events before it ended); Do forgets earlier failures and runs op
//     again at once.
//
// attempt is 1 for the first attempt after progress, and grows by one with
// each failure in a row. Before each attempt and while it waits, Do checks
// ctx, and returns ctx's error once it has ended. After the last attempt a
// bounded p allows, it returns an error wrapping ErrExhausted and the last
// failure.
func Do(ctx context.Context, c clockwork.Clock, p Policy, op func(attempt int) (done bool, err error)) error {
	p = p.WithDefaults()
	attempt := 1
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		done, err := op(attempt)
		switch {
		case done:
			return err
		case err == nil:
			attempt = 1
			continue
		case attempt >= p.MaxAttempts:
			return fmt.Errorf("%w: %d attempts: %w", ErrExhausted, attempt, err)
		}
		if werr := p.Wait(ctx, c, attempt); werr != nil {
			return werr
		}
		attempt++
	}
}
