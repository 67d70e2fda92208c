package election_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/internal/leaderkey"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestCandidates: leaderkey.ReadAll, the fleet's Operator's reader of the
// candidate keys that elections write, reads every election under a
// prefix, each one's candidates in campaign order with its leader first,
// decodes a value that is no candidate record whole, and ignores a key
// that names no election.
func TestCandidates(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	ctx := testCtx(t)
	s := newSession(t, cli, shortTTL)
	billing := newElection(t, s, cli, "billing", "n1")
	jobs := newElection(t, s, cli, "jobs", "n3")
	prefix := strings.TrimSuffix(billing.Prefix(), "billing/")

	none, err := leaderkey.ReadAll(ctx, cli, prefix)
	require.NoError(t, err)
	assert.Empty(t, none)

	t1, err := billing.Campaign(ctx)
	require.NoError(t, err)
	t3, err := jobs.Campaign(ctx)
	require.NoError(t, err)
	other, err := cli.Put(ctx, billing.Prefix()+"ff", "not json")
	require.NoError(t, err)
	_, err = cli.Put(ctx, prefix+"stray", "x")
	require.NoError(t, err)

	got, err := leaderkey.ReadAll(ctx, cli, prefix)
	require.NoError(t, err)
	assert.Equal(t, map[string][]leaderkey.Candidate{
		"billing": {
			{ID: "n1", Value: "addr-n1", Epoch: t1.Token().Epoch, Lease: s.Lease(), Key: t1.Key()},
			{Value: "not json", Epoch: other.Header.Revision, Key: billing.Prefix() + "ff"},
		},
		"jobs": {{ID: "n3", Value: "addr-n3", Epoch: t3.Token().Epoch, Lease: s.Lease(), Key: t3.Key()}},
	}, got)
	require.NoError(t, t1.Resign(ctx))
	require.NoError(t, t3.Resign(ctx))
}
