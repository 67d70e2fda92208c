package router_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tenure-go/tenure/fence/httpfence"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/router"
)

// TestWrongOwnerError: the router answers with the ownership package's
// error, which its own sentinels match (they are ownership's), and whose
// message says everything once.
func TestWrongOwnerError(t *testing.T) {
	e := &ownership.WrongOwnerError{Route: fleet.Route{Partition: 3, Owner: "b", Addr: "10.0.0.2:80", Epoch: 42}}
	assert.ErrorIs(t, e, ownership.ErrNotOwner)
	assert.NotErrorIs(t, e, ownership.ErrNoOwner)
	assert.ErrorIs(t, e, ownership.ErrNotOwner)
	var oe *ownership.WrongOwnerError
	assert.ErrorAs(t, fmt.Errorf("router: 421 from b: %w", e), &oe)
	assert.Equal(t, `ownership: not the owner: partition 3, owner "b" at 10.0.0.2:80 epoch 42`, e.Error())

	unknown := &ownership.WrongOwnerError{Route: fleet.Route{Partition: 7}}
	assert.ErrorIs(t, unknown, ownership.ErrNoOwner)
	assert.ErrorIs(t, unknown, ownership.ErrNotOwner)
	assert.Equal(t, "ownership: not the owner: partition 7, owner unknown", unknown.Error())
	assert.ErrorIs(t, &ownership.WrongOwnerError{Route: fleet.Route{Owner: "x"}}, ownership.ErrNoOwner, "an owner without an address cannot be reached")
}

func TestBackoff(t *testing.T) {
	b := router.DefaultBackoff()
	assert.Equal(t, router.Backoff{MaxAttempts: 10, Initial: 5 * time.Millisecond, Max: time.Second, Multiplier: 2, Jitter: 0.5}, b)
	require.NoError(t, b.Validate())

	// u=0 gives the full delay, u→1 the least (d*(1-Jitter)).
	tests := []struct {
		retry int
		u     float64
		want  time.Duration
	}{
		{0, 0, 0},
		{1, 0, 5 * time.Millisecond},
		{1, 1, 2500 * time.Microsecond},
		{2, 0, 10 * time.Millisecond},
		{3, 0.5, 15 * time.Millisecond},
		{8, 0, 640 * time.Millisecond},
		{9, 0, time.Second},
		{1000, 0, time.Second},
		{1000, 7, 500 * time.Millisecond}, // u is clamped to [0, 1]
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, b.Delay(tt.retry, tt.u), "retry %d u %v", tt.retry, tt.u)
	}
	assert.Equal(t, 5*time.Millisecond, router.Backoff{}.Delay(1, 0), "zero fields take defaults")

	for _, bad := range []router.Backoff{
		{MaxAttempts: -1},
		{Initial: -time.Second},
		{Initial: time.Second, Max: time.Millisecond},
		{Multiplier: 0.5},
		{Multiplier: math.Inf(1)},
		{Jitter: 1.5},
		{Jitter: -0.1},
		{Jitter: math.NaN()},
	} {
		assert.ErrorIs(t, bad.Validate(), router.ErrInvalidBackoff, "%+v", bad)
		err := router.ClientConfig{Cluster: "c", Backoff: bad}.Validate()
		assert.ErrorIs(t, err, router.ErrInvalidConfig, "%+v", bad)
		assert.ErrorIs(t, err, router.ErrInvalidBackoff, "%+v", bad)
	}
}

func TestConfig(t *testing.T) {
	d := router.DefaultConfig()
	assert.Equal(t, router.DefaultHandoffWait, d.HandoffWait)
	assert.Equal(t, "http", d.Scheme)
	assert.NotNil(t, d.Logger)
	require.NoError(t, d.Validate())
	require.NoError(t, router.Config{}.Validate(), "the zero Config takes the defaults")
	require.NoError(t, router.Config{Scheme: "https"}.Validate())
	err := router.Config{HandoffWait: -1}.Validate()
	assert.True(t, errors.Is(err, router.ErrInvalidConfig))
	assert.Contains(t, err.Error(), "-1ns")
}

// TestWriteErrorUnavailable: a handler whose etcd call failed because etcd
// could not serve it for now answers the retryable "unavailable" refusal,
// which Client retries; once the request itself is gone nothing is written.
func TestWriteErrorUnavailable(t *testing.T) {
	dropped := fmt.Errorf("etcdfence: commit of 1 writes: %w", status.Error(codes.Unknown, "raft proposal dropped")) // a leadership transfer
	for _, err := range []error{rpctypes.ErrLeaderChanged, fmt.Errorf("put: %w", rpctypes.ErrGRPCNoLeader), dropped} {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/k", nil)
		require.True(t, router.WriteError(rec, req, err))
		resp := rec.Result()
		assert.Equal(t, http.StatusServiceUnavailable, resp.StatusCode)
		ref, rerr := httpfence.ReadRefusal(resp)
		require.NoError(t, rerr)
		require.NotNil(t, ref)
		assert.Equal(t, httpfence.RefusalUnavailable, ref.Kind)
		assert.True(t, ref.Retryable())
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	req := httptest.NewRequest(http.MethodPost, "/k", nil).WithContext(ctx)
	assert.False(t, router.WriteError(httptest.NewRecorder(), req, rpctypes.ErrLeaderChanged), "the caller is gone")
	assert.False(t, router.WriteError(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/k", nil), errors.New("boom")))
}
