package fence

import (
	"context"
	"fmt"
	"sync"
)

// Gate is an in-memory fence: it admits a token for a scope iff the token's
// epoch is at least the highest epoch admitted for that scope so far, and
// records it. The zero Gate is ready to use. A Gate is safe for concurrent
// use; it must not be copied after first use.
//
// Gate suits a store that lives in one process (a cache, an in-memory state
// machine) or a test oracle. Stores that outlive a process keep the floor
// durably: see the etcd and SQL fences.
type Gate struct {
	mu     sync.Mutex
	floors map[string]int64
}

// Advance applies the fencing rule to t: it returns nil and raises the floor
// of t's scope to t.Epoch if t.Epoch >= the scope's floor, a *StaleError
// (errors.Is ErrStale) if it is older, or an error wrapping ErrInvalidToken
// if t is invalid. A new owner advances before its first write. With it a
// *Gate is a Fencer; ctx is not used, since a Gate never blocks. On a nil
// *Gate it returns an error wrapping ErrNilArgument.
func (g *Gate) Advance(_ context.Context, t Token) error {
	if g == nil {
		return fmt.Errorf("%w: nil *Gate", ErrNilArgument)
	}
	return g.Do(t, nil)
}

// Check reports whether t would be admitted, without recording it.
func (g *Gate) Check(t Token) error {
	if err := t.Validate(); err != nil {
		return err
	}
	g.mu.Lock()
	cur := g.floors[t.Scope]
	g.mu.Unlock()
	if t.Epoch < cur {
		return staleError(t, cur)
	}
	return nil
}

// Floor returns the highest epoch admitted for scope, or 0 if none.
func (g *Gate) Floor(scope string) int64 {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.floors[scope]
}

// Do advances to t and, if t is admitted, runs fn (if not nil) while
// holding the gate's lock: no other token can be admitted until fn returns,
// so no newer owner can slip in between the check and the write. It gives a
// process-local store the check-and-write atomicity that durable fences get
// from a transaction. fn must not call back into g.
func (g *Gate) Do(t Token, fn func() error) error {
	if err := t.Validate(); err != nil {
		return err
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	cur := g.floors[t.Scope]
	if t.Epoch < cur {
		return staleError(t, cur)
	}
	if t.Epoch > cur {
		if g.floors == nil {
			g.floors = make(map[string]int64)
		}
		g.floors[t.Scope] = t.Epoch
	}
	if fn == nil {
		return nil
	}
	return fn()
}
