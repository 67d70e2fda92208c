package election

import "time"

// What the tests of package election_test read of the package's
// internals.

// RenewRetryInterval is the retry interval R (renewRetryInterval).
const RenewRetryInterval = renewRetryInterval

// OutageBound is the running session's outage bound, with the TTL etcd
// granted (grantedOutageBound).
func (s *Session) OutageBound() time.Duration { return s.grantedOutageBound() }
