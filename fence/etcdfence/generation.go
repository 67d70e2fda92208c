package etcdfence

import (
	"sync"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// This file holds the floor generation: one key beside the floors that
// every transaction changing a floor also writes, so that "no floor has
// changed since the generation was G" is one comparison on the key's
// ModRevision instead of one comparison per scope. A batch of writes to many
// scopes (a Batcher's, a Commit's) then costs etcd what an unfenced
// transaction of the same writes does, plus one comparison.
//
// The rule (invariant G): a transaction that writes a floor writes the
// generation key too. Then, if the generation key's ModRevision is G at two
// revisions, no floor changed between them. A Store that read the floors of
// some scopes and the generation key in one transaction, and saw
// ModRevision G, knows those floors exactly for as long as the generation
// stays G: its generation form
//
//	If(ModRevision(generation) = G)  Then(writes, [Put(floor, epoch), Put(generation) if a floor rises])
//
// admits exactly what the steady form would. Only Stores of this package
// write floors, and all of them keep the rule.
//
// A generation that changed (any floor of the fleet rose: a new owner's
// Advance, say) fails the comparison though the writes may be fine; the
// writes then go again at once in the steady form, which reads the floors
// and the generation back, and the Store waits a growing number of batches before
// it tries the generation form again, so that a fleet whose floors keep
// moving costs one failed transaction now and then, not one per batch.

// GenerationKey returns the key whose ModRevision is the generation of
// every floor under FencePrefix: FencePrefix itself (the floor of the empty
// scope, which no token has). Every transaction of a Store that writes a
// floor writes it too. Its value is empty. A tool that lists the floors by
// prefix must skip it.
func (s *Store) GenerationKey() string { return s.cfg.FencePrefix }

// genPut is the write of the generation key that goes with a floor write.
func (s *Store) genPut() clientv3.Op { return clientv3.OpPut(s.GenerationKey(), "") }

// genCmp holds iff the generation key's ModRevision is g (0: the key does
// not exist).
func (s *Store) genCmp(g int64) clientv3.Cmp {
	c, pc := newCmp(s.GenerationKey(), pb.Compare_EQUAL, pb.Compare_MOD)
	pc.TargetUnion = &pb.Compare_ModRevision{ModRevision: g}
	return c
}

// maxGenBackoff bounds how many attempts go in the steady form after the
// generation form failed.
const maxGenBackoff = 64

// generation is what a Store knows of the floors at one generation: the
// exact floor of some scopes while the generation key's ModRevision is gen.
type generation struct {
	mu      sync.Mutex
	valid   bool
	gen     int64            // ModRevision of the generation key; 0: absent
	floors  map[string]int64 // scope -> its floor at gen (0: none)
	seen    int64            // revision of the newest transaction that taught us
	skip    int              // attempts left in the steady form
	backoff int              // the next skip after a failure
}

// plan decides the form of an attempt for groups. With at least two scopes
// (for one, the steady form costs the same comparison and never fails
// spuriously), if every scope's floor is known, it fills in each group's
// floor and returns the generation to compare (use). If not, refresh says
// whether the steady form should read the generation and the floors back.
// Groups whose lowest epoch is below the known floor take the steady form,
// which sorts out which writes are stale. Only a chunk's first attempt
// may take the generation form; a later one (after a failure) refreshes
// what the Store knows if it knows nothing.
func (g *generation) plan(groups []scopeGroup, first bool) (gen int64, use, refresh bool) {
	if len(groups) < 2 {
		return 0, false, false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if !first {
		return 0, false, !g.valid
	}
	if g.skip > 0 {
		g.skip--
		return 0, false, false
	}
	if !g.valid {
		return 0, false, true
	}
	for i := range groups {
		f, ok := g.floors[groups[i].scope]
		if !ok {
			return 0, false, true
		}
		if groups[i].items[0].p.w.Token.Epoch < f {
			return 0, false, false
		}
		groups[i].known = f
	}
	return g.gen, true, false
}

// learn records, from a transaction at revision rev, that the generation
// key's ModRevision was gen and the floors of scopes were floors (read in
// the same transaction). What was known at another generation is dropped.
func (g *generation) learn(rev, gen int64, scopes []string, floors []int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if rev < g.seen {
		return
	}
	g.seen = rev
	if !g.valid || g.gen != gen || len(g.floors) > maxCachedScopes {
		g.valid, g.gen = true, gen
		if g.floors == nil {
			g.floors = make(map[string]int64)
		}
		clear(g.floors)
	}
	for i, s := range scopes {
		g.floors[s] = floors[i]
	}
}

// raised records that a generation-form transaction compared generation
// old and, at revision rev, raised the floors of scopes to floors (writing
// the generation key, whose ModRevision is now rev).
func (g *generation) raised(old, rev int64, scopes []string, floors []int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.backoff = 0
	if rev < g.seen {
		return
	}
	g.seen = rev
	if !g.valid || g.gen != old {
		g.valid = false
		return
	}
	g.gen = rev
	for i, s := range scopes {
		g.floors[s] = floors[i]
	}
}

// invalidate forgets the floors: this Store wrote a floor and the
// generation without learning what else changed before.
func (g *generation) invalidate() {
	g.mu.Lock()
	g.valid = false
	g.mu.Unlock()
}

// held records that a generation-form transaction succeeded.
func (g *generation) held() {
	g.mu.Lock()
	g.backoff = 0
	g.mu.Unlock()
}

// missed records that a generation-form transaction comparing gen failed:
// the generation moved, or a compare-and-swap's version differed. The next
// attempts take the steady form, for longer after each failure in a row.
func (g *generation) missed(gen int64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.valid && g.gen == gen {
		g.valid = false
	}
	g.skip = g.backoff
	g.backoff = min(max(1, 2*g.backoff), maxGenBackoff)
}
