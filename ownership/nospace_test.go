package ownership

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/sim/cluster"
)

// noSpaceCluster starts a 1-member etcd whose database quota is small
// enough to fill in a moment (etcd's --quota-backend-bytes).
func noSpaceCluster(t *testing.T) *cluster.Cluster {
	cfg := cluster.DefaultConfig()
	cfg.QuotaBackendBytes = 4 << 20
	return cluster.NewWithConfig(t, cfg)
}

// A node Closed with a deadline that passes while etcd's NOSPACE alarm
// stands ends as a crash would: Close returns an error wrapping
// fleet.ErrNoSpace, the node logs why, and its claims go with its lease
// (nobody can claim them until the alarm is disarmed). Once it is, the
// other node takes them.
func TestCloseDeadlineUnderNoSpace(t *testing.T) {
	const name, parts = "nospace-close", 8
	c := noSpaceCluster(t)
	cli := c.NewClient(t)
	buf := &testsupport.Buffer{}
	logger := hclog.New(&hclog.LoggerOptions{Level: hclog.Info, Output: buf})
	cfgA := testConfig(t, name, "a", parts)
	cfgA.Logger = logger
	a := join(t, cli, cfgA)
	b := join(t, cli, testConfig(t, name, "b", parts))
	waitStable(t, 20*time.Second, a, b)
	held := len(a.Owned())
	require.NotZero(t, held)

	ctx := context.Background()
	_, err := cluster.Fill(ctx, cli)
	require.NoError(t, err)

	cctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	err = a.Close(cctx)
	cancel()
	require.ErrorIs(t, err, fleet.ErrNoSpace)
	require.Contains(t, err.Error(), "as in a crash")
	require.Contains(t, buf.String(), fmt.Sprintf("etcd database full (NOSPACE alarm): Close's context ended; %s go with the lease, as in a crash", partitionCount(held)))

	// Its claims go with its lease; b cannot claim them under the alarm.
	require.NoError(t, waitFor(15*time.Second, func() error {
		for p, cl := range etcdClaims(t, cli, name) {
			if cl.Owner == "a" {
				return fmt.Errorf("partition %d still claimed by a", p)
			}
		}
		return nil
	}, b))
	require.NotEmpty(t, b.Owned(), "b serves its own partitions under the alarm")
	require.Less(t, len(etcdClaims(t, cli, name)), parts, "a's partitions are unclaimed while etcd refuses puts")

	rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
	defer rcancel()
	require.NoError(t, c.ReclaimSpace(rctx, cli))
	waitStable(t, 20*time.Second, b)
}
