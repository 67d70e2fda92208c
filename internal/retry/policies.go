package retry

import "time"

// The named policies of tenure's retries. Each is a function that returns
// a fresh value, so that no caller can change another's figures.

// Background is the policy of election's background loops (a campaign's
// retries and its wait for its turn, Run's campaigns, the leader's
// observation, a term's watch of its key) and of the router client's watch
// of the fleet's spec: 50ms doubling up to 2s, jittered, until stopped, so
// that a call that keeps failing costs a few calls a second, not a CPU.
func Background() Policy {
	return Policy{MaxAttempts: Unbounded, Initial: 50 * time.Millisecond, Max: 2 * time.Second}
}

// Node is the policy of an ownership node's background work (claims,
// fencers, claim deletions, lease checks, reads of the fleet, a rejoin
// that finds its ID held by another process): 50ms doubling up to 5s,
// jittered, until stopped.
func Node() Policy {
	return Policy{MaxAttempts: Unbounded, Initial: 50 * time.Millisecond, Max: 5 * time.Second}
}

// RejoinMax caps the delay between a node's rejoin attempts, and is the
// interval at which a rejoining node, and a reader of the fleet whose
// connection is down, ask their etcd client to reconnect: what an etcd
// outage costs a node beyond the round trips of its rejoin and claims.
const RejoinMax = 250 * time.Millisecond

// Rejoin is the policy of a node's rejoin attempts after its session
// ended: 50ms doubling up to RejoinMax, jittered, until stopped.
func Rejoin() Policy {
	return Policy{MaxAttempts: Unbounded, Initial: 50 * time.Millisecond, Max: RejoinMax}
}

// Request is the default policy of a request retried on the caller's
// behalf (router.Router.Do, router.Client.Do): up to 10 attempts, 5ms
// doubling up to 1s, half of each delay randomized; the worst case spends
// about 3.3s in delays. It is the zero Policy with its defaults applied.
func Request() Policy { return Policy{}.WithDefaults() }
