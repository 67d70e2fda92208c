// Package etcdfence applies fencing inside etcd: the store, not the lock,
// rejects a writer whose tenure has ended.
//
// It offers both forms of the check that the fencing rules ask for.
//
// The claim-bound guard, ClaimGuard, is a clientv3.Cmp that holds iff the
// claim (or leadership key) that issued a token still stands: its epoch
// equals the token's, a claim's ModRevision (a claim handed over to the
// next owner is rewritten, and its ModRevision rises) or a leadership
// key's CreateRevision (Proclaim rewrites it and keeps that). Put it in
// the If of your own transaction and the transaction lands only while its writer still holds
// the claim. It is the strongest check etcd offers and keeps no state.
// ClaimGuarded runs such a transaction for given operations and turns a
// refusal into a *fence.StaleError.
//
// The floor-based Store is a fenced key-value store over etcd: Get, Put,
// Delete and CompareAndSwap on a key's version, each taking the caller's
// token. For every scope it keeps the highest epoch admitted so far, the
// floor, in the key FencePrefix()+scope, as a fixed-width 19-digit decimal
// so that etcd's byte-wise value comparison orders epochs numerically.
// The check of the token, the recording of its epoch and the write commit
// in one transaction, whose comparison is on the floor of the token's
// scope as etcd records it. A Store takes one of two forms for it:
//
//	// Single-write form, when the Store has not seen the scope's floor yet.
//	// Value comparisons fail on a missing key, so a scope never written
//	// falls in the Else branch, which admits:
//	If(Value(floor) > epoch)  Then(Get(floor))  Else(Put(floor, epoch), write)
//
//	// Steady form, when the Store remembers floor c <= epoch (and for
//	// batches). admitBound(e) sorts right after e's encoding, so the
//	// comparison holds iff floor <= epoch; the floor is written only when
//	// the epoch raises it:
//	If(Value(floor) < admitBound(epoch))  Then([Put(floor, epoch) if epoch > c,] write)
//
// Admission depends only on the floors etcd records: any writer may raise
// a floor (another Store, a process of another build, an operator's
// etcdctl writing the 19-digit encoding), and the next write below it is
// refused, whatever form it takes. The remembered floor is a hint that
// only makes a write fail faster: a token older than it is refused without
// a round trip, because floors only rise. A refused steady-form write
// reads the floor in a second request to learn why. A rejected write
// returns a *fence.StaleError carrying the scope, the presented epoch and
// the current floor; errors.Is(err, fence.ErrStale) holds. Advance raises a
// scope's floor on its own, as a new owner does before its first write, so
// that a stale owner cannot write even keys the new owner never touches;
// with it a Store is a fence.Fencer. Floors must never be deleted.
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
// A fleet's floors are its own: Config names the fleet as
// ownership.Config does (Cluster, or ClusterPrefix for its Prefix), there
// is no default, and the floors live under that fleet's prefix,
// "/tenure/<Cluster>/fence/", so that two fleets on one etcd never fence
// each other. Store.FencePrefix reports where; a node refuses at Join a
// Store whose floors are another fleet's.
//
// Group commit: Store.Commit applies many fenced writes in one flat
// transaction (split at etcd's ops-per-transaction and request-size limits)
// in the steady form, with one floor comparison per scope:
//
//	If(per scope: Value(floor) < admitBound(lowest epoch), per compare-and-swap: Version(key) = expected)
//	Then(writes, [Put(floor, highest epoch) where it rises])
//
// If a check fails, the writes it refuses are answered alone and the
// others commit in a retry, so a stale write never takes its neighbours
// down with it. Batcher gathers writes from many goroutines into such
// commits when they pay: a write that finds it idle commits at once,
// writes to one key keep their order, and consecutive Puts to one key
// under one token may be coalesced into one. Each write's answer is the
// one it would get alone, but for the revision it shares with its batch;
// the Batcher's documentation states the contract in full.
package etcdfence
