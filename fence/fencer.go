package fence

import (
	"context"
	"fmt"
)

// Fencer raises the fence floor of one store to a new tenure's token. Before
// any work runs under a newly acquired epoch (an ownership partition, an
// election term), tenure calls Advance on every configured Fencer with the
// tenure's token, so that a stale holder can no longer write to the store,
// not even keys the new holder has not touched yet.
//
// Advance must be idempotent and safe for concurrent use. It returns an
// error wrapping ErrStale if the store's floor for t.Scope is already above
// t.Epoch. ctx is cancelled when the tenure ends, and Advance must then
// return promptly.
//
// etcdfence.Store, sqlfence.Fencer and *Gate are Fencers.
type Fencer interface {
	Advance(ctx context.Context, t Token) error
}

// FencerFunc adapts a function to a Fencer.
type FencerFunc func(ctx context.Context, t Token) error

// Advance calls f(ctx, t). A nil f returns ErrNilArgument.
func (f FencerFunc) Advance(ctx context.Context, t Token) error {
	if f == nil {
		return fmt.Errorf("%w: nil FencerFunc", ErrNilArgument)
	}
	return f(ctx, t)
}
