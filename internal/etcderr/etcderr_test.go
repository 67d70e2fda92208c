package etcderr_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tenure-go/tenure/internal/etcderr"
)

func TestClassify(t *testing.T) {
	assert.True(t, etcderr.LeaseNotFound(rpctypes.ErrLeaseNotFound))
	assert.True(t, etcderr.LeaseNotFound(fmt.Errorf("revoke: %w", rpctypes.ErrGRPCLeaseNotFound)))
	assert.False(t, etcderr.LeaseNotFound(rpctypes.ErrTooManyOps))
	assert.True(t, etcderr.TooManyOps(rpctypes.ErrTooManyOps))
	assert.True(t, etcderr.TooManyOps(fmt.Errorf("claim: %w", rpctypes.ErrGRPCTooManyOps)))
	assert.False(t, etcderr.TooManyOps(context.Canceled))
	assert.False(t, etcderr.LeaseNotFound(nil))
}

func TestClientClosed(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  error
		want bool
	}{
		{"grpc's error", grpc.ErrClientConnClosing, true},
		{"wrapped", fmt.Errorf("read members: %w", grpc.ErrClientConnClosing), true},
		{"an equal status made anew", status.Error(codes.Canceled, "grpc: the client connection is closing"), true},
		{"another cancellation", status.Error(codes.Canceled, "context canceled"), false},
		{"context", context.Canceled, false},
		{"another code", status.Error(codes.Unavailable, "grpc: the client connection is closing"), false},
		{"nil", nil, false},
	} {
		assert.Equal(t, tt.want, etcderr.ClientClosed(tt.err), tt.name)
	}
}

func TestUnavailable(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errors.New("boom"), false},
		{rpctypes.ErrLeaderChanged, true},
		{rpctypes.ErrNoLeader, true},
		{rpctypes.ErrTimeoutDueToLeaderFail, true},
		{fmt.Errorf("put: %w", rpctypes.ErrGRPCNoLeader), true},
		{status.Error(codes.Unavailable, "connection refused"), true},
		{status.Error(codes.DeadlineExceeded, "deadline"), true},
		{rpctypes.ErrLeaseNotFound, false},
		{status.Error(codes.InvalidArgument, "bad"), false},
		{fmt.Errorf("commit: %w", status.Error(codes.Unknown, "raft: stopped")), true},         // a member removed while it held the call
		{fmt.Errorf("commit: %w", status.Error(codes.Unknown, "raft proposal dropped")), true}, // a leader handing its leadership over
		{status.Error(codes.Unknown, "raft proposal"), false},
		{status.Error(codes.Unknown, "something else"), false},
	} {
		if got := etcderr.Unavailable(tt.err); got != tt.want {
			t.Errorf("etcderr.Unavailable(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}
