package sqlfence

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/tenure-go/tenure/fence"
)

// Fencer raises floors in a database, each in a transaction of its own: it
// is what an owner registers so that its new epoch is recorded before its
// first write. Its Advance method matches the interface the ownership
// package declares for fencers. A Fencer is safe for concurrent use.
type Fencer struct {
	// DB is the database. It must not be nil.
	DB *sql.DB
	// Fences names the table and dialect. It must not be nil.
	Fences *Fences
}

// Advance raises t's scope to t.Epoch in its own transaction. It returns a
// *fence.StaleError if the scope is already newer.
func (f Fencer) Advance(ctx context.Context, t fence.Token) error {
	if f.DB == nil || f.Fences == nil {
		return fmt.Errorf("%w: Fencer needs DB and Fences", ErrInvalidConfig)
	}
	return f.Fences.Do(ctx, f.DB, t, func(*sql.Tx) error { return nil })
}

// Admit is Advance under the name of the fencing rule, so that a Fencer can
// stand wherever an admitter of tokens is expected (such as an HTTP
// middleware).
func (f Fencer) Admit(ctx context.Context, t fence.Token) error { return f.Advance(ctx, t) }
