// Package fence provides fencing tokens and the store-side checks that make a
// stale owner harmless.
//
// A Token names what it fences (its Scope, such as "p/17" for partition 17 or
// "leader/billing" for an election) and the Epoch at which its holder's tenure
// began: the etcd revision at which the holder's claim or leadership key was
// created. Epochs of successive holders of the same scope strictly increase,
// because etcd revisions do.
//
// Every side effect carries a token, and the store admits a token for a scope
// only if its epoch is at least the highest epoch it has admitted for that
// scope (equal epochs are the same holder continuing). A holder that was
// paused past the end of its tenure wakes up with an older epoch than the one
// its successor already presented, and the store rejects it with an error for
// which errors.Is(err, ErrStale) holds, however long the pause was.
//
// Gate is the in-memory form of that rule. Sub-packages apply it inside real
// stores: etcd transactions, SQL transactions and HTTP requests.
package fence
