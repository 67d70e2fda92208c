// Package etcdfence applies fencing inside etcd: the store, not the lock,
// rejects a writer whose tenure has ended.
//
// It offers both forms of the check that the fencing rules ask for.
//
// The claim-bound guard, ClaimGuard, is a clientv3.Cmp that holds iff the
// claim (or leadership key) that issued a token still stands: its
// CreateRevision equals the token's epoch. Put it in the If of your own
// transaction and the transaction lands only while its writer still holds
// the claim. It is the strongest check etcd offers and keeps no state.
// ClaimGuarded runs such a transaction for given operations and turns a
// refusal into a *fence.StaleError.
//
// The floor-based Store is a fenced key-value store over etcd: Get, Put,
// Delete and CompareAndSwap on a key's version, each taking the caller's
// token. For every scope it keeps the highest epoch admitted so far, the
// floor, in the key <FencePrefix><scope>, as a fixed-width 19-digit decimal
// so that etcd's byte-wise value comparison orders epochs numerically. The
// check of the token, the recording of its epoch and the write commit in one
// transaction. A Store takes one of two forms for it:
//
//	// Single-write form, when the Store has not seen the scope's floor yet.
//	// Value comparisons fail on a missing key, so a scope never written
//	// falls in the Else branch, which admits:
//	If(Value(floor) > epoch)  Then(Get(floor))  Else(Put(floor, epoch), write, Put(generation))
//
//	// Steady form, when the Store remembers floor c <= epoch (and for
//	// batches). admitBound(e) sorts right after e's encoding, so the
//	// comparison holds iff floor <= epoch; the floor is written only when
//	// the epoch raises it:
//	If(Value(floor) < admitBound(epoch))  Then([Put(floor, epoch), Put(generation) if epoch > c,] write)
//
// The remembered floor is a hint, never trusted: etcd checks every write. A
// refused steady-form write reads the floor in a second request to learn
// why. Floors only rise, so a token older than a remembered floor is
// refused without a round trip. A rejected write returns a
// *fence.StaleError carrying the scope, the presented epoch and the current
// floor; errors.Is(err, fence.ErrStale) holds. Advance raises a scope's floor
// on its own, as a new owner does before its first write, so that a stale
// owner cannot write even keys the new owner never touches; with it a
// Store is a fence.Fencer. Floors must never be deleted.
//
// Who raises the floor: Get checks a token against the floor but does not
// record it, so a tenure's first operation must not be a read unless its
// floor was raised before. ownership's Config.Fencers and election's
// ElectionConfig.Fencers do it: give them the Store, and they call Advance
// with the new tenure's token before any work runs under it (before
// OnAcquired, before Campaign returns the Term). A leader or owner rolled by
// hand must call Advance itself, with its token, before its first read;
// otherwise a stale holder that read before the change and writes after the
// new holder's read loses the new holder an update.
//
// Group commit: Store.Commit applies many fenced writes in one flat
// transaction (split at etcd's ops-per-transaction and request-size limits)
// with one floor comparison per scope; if a check fails, the writes it
// refuses are answered alone and the others commit in a retry, so a stale
// write never takes its neighbours down with it. Once a Store knows the
// floors of a transaction's scopes exactly, it replaces those comparisons
// with one: on the ModRevision of the floor generation, a key
// (GenerationKey) that every transaction writing a floor writes too, so
// that an unchanged generation means unchanged floors:
//
//	// Generation form, for writes of two or more scopes whose floors the
//	// Store read at generation G (and none below its floor):
//	If(ModRevision(generation) = G)  Then(writes, [Put(floor, epoch), Put(generation) where a floor rises])
//
// When any floor of the fleet rises, the comparison fails, and the writes go
// again in the steady form, which reads the generation back. The rule binds
// every writer of floors under a FencePrefix: all Stores of this package keep
// it, but a floor written by anything else (a Store of an older version of
// this package, a tool writing keys by hand) without the generation would
// let a generation-form batch admit a write that floor should refuse. Batcher gathers writes from
// many goroutines into such commits when they pay: a write that finds it
// idle commits at once, writes to one key keep their order, and
// consecutive Puts to one key under one token may be coalesced into one.
package etcdfence
