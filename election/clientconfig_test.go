package election_test

import (
	"fmt"
	"time"

	"github.com/tenure-go/tenure/election"
)

// The etcd client settings that go with a session's TTL: keepalive pings
// after 10s (gRPC's floor) or TTL/2 of silence from a member, given half
// the session's outage bound (at least 1s) to be answered.
func ExampleSessionConfig_ClientConfig() {
	for _, ttl := range []time.Duration{2 * time.Second, 10 * time.Second, 60 * time.Second} {
		cfg := election.SessionConfig{TTL: ttl}.ClientConfig([]string{"10.0.0.1:2379", "10.0.0.2:2379", "10.0.0.3:2379"})
		fmt.Printf("TTL %v: %d endpoints, dial timeout %v, keepalive %v, keepalive timeout %v\n",
			ttl, len(cfg.Endpoints), cfg.DialTimeout, cfg.DialKeepAliveTime, cfg.DialKeepAliveTimeout)
	}
	// Output:
	// TTL 2s: 3 endpoints, dial timeout 2s, keepalive 10s, keepalive timeout 1s
	// TTL 10s: 3 endpoints, dial timeout 10s, keepalive 10s, keepalive timeout 2.733s
	// TTL 1m0s: 3 endpoints, dial timeout 1m0s, keepalive 30s, keepalive timeout 16.9s
}
