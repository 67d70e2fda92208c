package election_test

import (
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/sim/cluster"
)

// lossCounts returns tenure_session_losses_total by cause.
func lossCounts(t *testing.T, reg prometheus.Gatherer) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, c := range []string{"expired", "revoked", "deleted", "closed", "other"} {
		out[c] = value(t, reg, "tenure_session_losses_total", map[string]string{"cause": c})
	}
	return out
}

// Each end of a session is classified once, where it happens, and counted
// under that one cause: a live lease checks out alive; a lease revoked in
// etcd before the safe deadline is "revoked"; a lease gone after the safe
// deadline (a pause) is "expired"; a key removed while the lease lives is
// "deleted"; and a later Close counts nothing more.
func TestSessionLossClassifiedOnce(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	ctx := testCtx(t)

	cases := []struct {
		name string
		end  func(t *testing.T, s *election.Session, clk *clockwork.FakeClock)
		want error
	}{
		{"revoked", func(t *testing.T, s *election.Session, _ *clockwork.FakeClock) {
			_, err := cli.Revoke(ctx, s.Lease())
			require.NoError(t, err)
			require.ErrorIs(t, s.Check(ctx), election.ErrLeaseLost)
		}, election.ErrLeaseLost},
		{"expired", func(t *testing.T, s *election.Session, clk *clockwork.FakeClock) {
			// etcd lost the lease and the safe deadline passed meanwhile, as
			// for a process stopped past its TTL: expired, not revoked.
			_, err := cli.Revoke(ctx, s.Lease())
			require.NoError(t, err)
			clk.Advance(s.Status().SafeDeadline.Sub(clk.Now()) + time.Second)
			require.ErrorIs(t, s.Check(ctx), election.ErrSessionExpired)
		}, election.ErrSessionExpired},
		{"deleted", func(t *testing.T, s *election.Session, _ *clockwork.FakeClock) {
			require.NoError(t, s.Check(ctx), "the lease lives")
			s.EndKeyDeleted("/tenure/x/members/a")
		}, election.ErrKeyDeleted},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reg := prometheus.NewPedanticRegistry()
			clk := clockwork.NewFakeClock()
			s, err := election.NewSession(ctx, cli, election.SessionConfig{TTL: shortTTL, Metrics: reg, Clock: clk})
			require.NoError(t, err)
			require.NoError(t, s.Check(ctx), "a fresh lease lives")

			tc.end(t, s, clk)
			recv(t, s.Done(), "the session's end")
			require.ErrorIs(t, s.Err(), tc.want)
			require.ErrorIs(t, s.Check(ctx), tc.want, "Check after the end returns the end")
			require.NoError(t, s.Close(ctx))
			want := map[string]float64{"expired": 0, "revoked": 0, "deleted": 0, "closed": 0, "other": 0}
			want[election.LossCause(tc.want)] = 1
			assert.Equal(t, want, lossCounts(t, reg), "counted once, under %s", tc.name)
		})
	}
	assert.Equal(t, "", election.LossCause(nil))
	assert.Equal(t, "closed", election.LossCause(election.ErrSessionClosed))
}
