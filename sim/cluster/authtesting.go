package cluster

import (
	"context"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// AuthTokenTTL is etcd's shortest auth-token lifetime, the one
// NewWithAuth sets: an unused simple token expires after it.
const AuthTokenTTL = time.Second

// AuthCluster is a cluster for a test with authentication on and
// AuthTokenTTL: the root user and the tenants given to NewWithAuth. It
// counts the requests etcd refused for an expired or unknown auth token.
type AuthCluster struct {
	*Cluster
	logs  *observer.ObservedLogs // etcd's warnings
	start time.Time
}

// NewWithAuth starts a 1-member cluster for a test, with authentication on,
// a root user and users, and closes it when the test ends. It fails the
// test if the cluster does not start or authentication cannot be set up.
func NewWithAuth(tb testing.TB, users ...User) *AuthCluster {
	tb.Helper()
	core, logs := observer.New(zapcore.WarnLevel)
	cfg := DefaultConfig()
	cfg.AuthTokenTTL = AuthTokenTTL
	cfg.Logger = zap.New(core)
	c := NewWithConfig(tb, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := EnableAuth(ctx, c.NewClient(tb), "root-password", users...); err != nil {
		tb.Fatalf("enable auth: %v", err)
	}
	return &AuthCluster{Cluster: c, logs: logs, start: time.Now()}
}

// Refusals counts the requests etcd refused for an expired or unknown auth
// token so far.
func (c *AuthCluster) Refusals() int { return c.logs.FilterMessage("invalid auth token").Len() }

// MaxRefusals is the most refusals for an expired token that clients may
// have met since the cluster started if none of them spins on one: a
// client that presents an expired token is refused once, fetches a new one
// and is not refused again before that one expires. A watch created on a
// stream opened under a token that has since expired is refused however
// often it is retried.
func (c *AuthCluster) MaxRefusals(clients int) int {
	return clients * int(time.Since(c.start)/AuthTokenTTL+1)
}

// OutliveTokens lets every auth token that nothing uses meanwhile expire
// twice over: etcd deletes an unused simple token between its TTL and its
// TTL plus one second after its last use, and says nothing when it does,
// so there is no event to wait on.
func OutliveTokens() { time.Sleep(2*AuthTokenTTL + 2*time.Second) }
