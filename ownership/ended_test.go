package ownership

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/ownership/fleet"
)

// Ended, the one test of "the tenure ended, route the work again": the
// tenure's own causes, a stale write, and a context error whose context
// ended with the tenure; the context's cause names the reason when it has
// one. reason.cause is its inverse.
func TestEnded(t *testing.T) {
	ended := func(cause error) context.Context {
		ctx, cancel := context.WithCancelCause(context.Background())
		cancel(cause)
		return ctx
	}
	live := context.Background()
	for _, tt := range []struct {
		name string
		ctx  context.Context
		err  error
		want error
		ok   bool
	}{
		{"nil", live, nil, nil, false},
		{"other", live, errors.New("disk full"), nil, false},
		{"moved", live, fmt.Errorf("work: %w", ErrMoved), ErrMoved, true},
		{"lost", live, ErrLost, ErrLost, true},
		{"closed", live, ErrClosed, ErrClosed, true},
		{"session lost hint", live, &WrongOwnerError{SessionLost: true}, ErrLost, true},
		{"not owner", live, &WrongOwnerError{Route: fleet.Route{Owner: "b", Addr: "h:1"}}, nil, false},
		{"stale", live, &fence.StaleError{Scope: "p/1", Presented: 2, Current: 3}, ErrMoved, true},
		{"stale, lost", ended(ErrLost), fence.ErrStale, ErrLost, true},
		{"cut short, moved", ended(ErrMoved), context.Canceled, ErrMoved, true},
		{"cut short, closed", ended(ErrClosed), fmt.Errorf("store: %w", context.Canceled), ErrClosed, true},
		{"caller's cancel", ended(context.Canceled), context.Canceled, nil, false},
		{"live context", live, context.DeadlineExceeded, nil, false},
		{"moved, context lost", ended(ErrLost), ErrMoved, ErrLost, true},
		{"nil context", nil, ErrMoved, ErrMoved, true},
	} {
		r, ok := Ended(tt.ctx, tt.err)
		assert.Equal(t, tt.ok, ok, tt.name)
		assert.Equal(t, tt.want, r, tt.name)
	}
	for _, r := range []reason{reasonMoved, reasonLost, reasonClosed} {
		got, ok := Ended(ended(r.cause()), context.Canceled)
		assert.True(t, ok, r.String())
		assert.Equal(t, r.cause(), got, "a context that ended with the cause of %v", r)
	}
}
