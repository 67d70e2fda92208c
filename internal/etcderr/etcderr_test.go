package etcderr_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"

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
