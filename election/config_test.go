package election_test

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jonboulle/clockwork"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
)

func TestSessionConfigValidate(t *testing.T) {
	cases := []struct {
		name string
		cfg  election.SessionConfig
		ok   bool
	}{
		{"zero value gets defaults", election.SessionConfig{}, true},
		{"minimum TTL", election.SessionConfig{TTL: 2 * time.Second}, true},
		{"TTL below etcd minimum", election.SessionConfig{TTL: 1999 * time.Millisecond}, false},
		{"negative TTL", election.SessionConfig{TTL: -time.Second}, false},
		{"renew interval equals TTL", election.SessionConfig{TTL: 3 * time.Second, RenewInterval: 3 * time.Second}, false},
		{"renew interval above TTL", election.SessionConfig{TTL: 3 * time.Second, RenewInterval: 5 * time.Second}, false},
		{"negative renew interval", election.SessionConfig{RenewInterval: -time.Second}, false},
		{"margin equals TTL", election.SessionConfig{TTL: 3 * time.Second, SafetyMargin: 3 * time.Second}, false},
		{"margin above TTL", election.SessionConfig{TTL: 3 * time.Second, SafetyMargin: time.Minute}, false},
		{"negative margin", election.SessionConfig{SafetyMargin: -time.Second}, false},
		{"renew interval past TTL - margin", election.SessionConfig{TTL: 3 * time.Second, RenewInterval: 2 * time.Second, SafetyMargin: time.Second}, false},
		{"explicit valid", election.SessionConfig{TTL: 5 * time.Second, RenewInterval: time.Second, SafetyMargin: 2 * time.Second}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			if tc.ok {
				assert.NoError(t, err)
				return
			}
			assert.ErrorIs(t, err, election.ErrInvalidConfig)
			// NewSession validates before it touches etcd: no client needed
			// beyond a non-nil one.
			var cli clientv3.Lease = clientv3.NewLeaseFromLeaseClient(nil, nil, 0)
			s, err := election.NewSession(context.Background(), cli, tc.cfg)
			assert.ErrorIs(t, err, election.ErrInvalidConfig)
			assert.Nil(t, s)
			_ = cli.Close()
		})
	}
}

func TestDefaultSessionConfig(t *testing.T) {
	cfg := election.DefaultSessionConfig()
	require.NoError(t, cfg.Validate())
	assert.Equal(t, 10*time.Second, cfg.TTL)
	assert.Equal(t, 10*time.Second/3, cfg.RenewInterval)
	assert.Equal(t, time.Second, cfg.SafetyMargin)
	assert.NotNil(t, cfg.Clock)
	assert.NotNil(t, cfg.Logger)
}

func TestNilClients(t *testing.T) {
	ctx := context.Background()
	_, err := election.NewSession(ctx, nil, election.SessionConfig{})
	assert.ErrorIs(t, err, election.ErrNilArgument)
	var nilClient *clientv3.Client
	_, err = election.NewSession(ctx, nilClient, election.SessionConfig{})
	assert.ErrorIs(t, err, election.ErrNilArgument, "a typed nil client must not panic")

	cfg := election.ElectionConfig{Cluster: testCluster, Name: "x"}
	_, err = election.NewElection(nil, nil, nil, cfg)
	assert.ErrorIs(t, err, election.ErrNilArgument)
	_, err = election.NewElection(nil, nilClient, nilClient, cfg)
	assert.ErrorIs(t, err, election.ErrNilArgument)
	kv := clientv3.NewKVFromKVClient(nil, nil)
	_, err = election.NewElection(nil, kv, nil, cfg)
	assert.ErrorIs(t, err, election.ErrNilArgument)
}

func TestElectionConfigValidate(t *testing.T) {
	kv := clientv3.NewKVFromKVClient(nil, nil)
	w := clientv3.NewWatchFromWatchClient(nil, nil)
	defer w.Close()
	store := func(cfg etcdfence.Config) fence.Fencer {
		s, err := etcdfence.New(kv, cfg)
		require.NoError(t, err)
		return s
	}
	cases := []struct {
		name    string
		cfg     election.ElectionConfig
		wantErr error
	}{
		{"valid", election.ElectionConfig{Cluster: "c", Name: "billing"}, nil},
		{"valid with prefix", election.ElectionConfig{Prefix: "/apps/x", Name: "billing"}, nil},
		{"empty name", election.ElectionConfig{Cluster: "c"}, election.ErrInvalidConfig},
		{"name with slash", election.ElectionConfig{Cluster: "c", Name: "a/b"}, election.ErrInvalidConfig},
		{"name with NUL", election.ElectionConfig{Cluster: "c", Name: "a\x00b"}, election.ErrInvalidConfig},
		{"name with space", election.ElectionConfig{Cluster: "c", Name: "a b"}, election.ErrInvalidConfig},
		{"name not UTF-8", election.ElectionConfig{Cluster: "c", Name: "\xff"}, election.ErrInvalidConfig},
		{"name too long", election.ElectionConfig{Cluster: "c", Name: string(make([]byte, fence.MaxScopeLen))}, election.ErrInvalidConfig},
		{"no cluster or prefix", election.ElectionConfig{Name: "billing"}, election.ErrInvalidConfig},
		{"negative resign timeout", election.ElectionConfig{Cluster: "c", Name: "billing", ResignTimeout: -time.Second}, election.ErrInvalidConfig},
		{"nil fencer", election.ElectionConfig{Cluster: "c", Name: "billing", Fencers: []fence.Fencer{nil}}, election.ErrInvalidConfig},
		{"typed nil fencer", election.ElectionConfig{Cluster: "c", Name: "billing", Fencers: []fence.Fencer{okFencer, (*etcdfence.Store)(nil)}}, election.ErrInvalidConfig},
		{"nil fencer func", election.ElectionConfig{Cluster: "c", Name: "billing", Fencers: []fence.Fencer{fence.FencerFunc(nil)}}, election.ErrInvalidConfig},
		{"valid fencers", election.ElectionConfig{Cluster: "c", Name: "billing", Fencers: []fence.Fencer{okFencer}}, nil},
		{"own fleet's store", election.ElectionConfig{Cluster: "c", Name: "billing", Fencers: []fence.Fencer{store(etcdfence.Config{Cluster: "c"})}}, nil},
		{"own prefix's store", election.ElectionConfig{Prefix: "/apps/x", Name: "billing", Fencers: []fence.Fencer{store(etcdfence.Config{ClusterPrefix: "/apps/x/"})}}, nil},
		{"another fleet's store", election.ElectionConfig{Cluster: "c", Name: "billing", Fencers: []fence.Fencer{okFencer, store(etcdfence.Config{Cluster: "d"})}}, election.ErrForeignFencer},
		{"a prefix overrides the cluster", election.ElectionConfig{Cluster: "c", Prefix: "/apps/x", Name: "billing", Fencers: []fence.Fencer{store(etcdfence.Config{Cluster: "c"})}}, election.ErrForeignFencer},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			e, nerr := election.NewElection(nil, kv, w, tc.cfg)
			if tc.wantErr == nil {
				assert.NoError(t, err)
				require.NoError(t, nerr)
				assert.Equal(t, tc.cfg.Name, e.Status().Name)
				return
			}
			assert.ErrorIs(t, err, tc.wantErr)
			assert.ErrorIs(t, err, election.ErrInvalidConfig)
			assert.ErrorIs(t, nerr, tc.wantErr)
			assert.Nil(t, e)
		})
	}
}

func TestObserveOnlyElection(t *testing.T) {
	kv := clientv3.NewKVFromKVClient(nil, nil)
	w := clientv3.NewWatchFromWatchClient(nil, nil)
	defer w.Close()
	e, err := election.NewElection(nil, kv, w, election.ElectionConfig{Cluster: "c", Name: "billing"})
	require.NoError(t, err)
	assert.Equal(t, "/tenure/c/leader/billing/", e.Prefix())
	_, err = e.Campaign(context.Background())
	assert.ErrorIs(t, err, election.ErrNoSession)
	err = e.Run(context.Background(), func(context.Context, fence.Token) error { return nil })
	assert.ErrorIs(t, err, election.ErrNoSession)
}

func TestDefaultElectionConfig(t *testing.T) {
	cfg := election.DefaultElectionConfig()
	assert.Equal(t, 5*time.Second, cfg.ResignTimeout)
	assert.NotNil(t, cfg.Logger)
	assert.Nil(t, cfg.Clock, "nil: the session's clock")
	assert.ErrorIs(t, cfg.Validate(), election.ErrInvalidConfig, "Name is the caller's to set")
	cfg.Cluster, cfg.Name = "c", "billing"
	require.NoError(t, cfg.Validate())
}

// TestNewElectionCopiesConfig: NewElection neither keeps nor changes the
// caller's config.
func TestNewElectionCopiesConfig(t *testing.T) {
	kv := clientv3.NewKVFromKVClient(nil, nil)
	w := clientv3.NewWatchFromWatchClient(nil, nil)
	defer w.Close()
	fencers := []fence.Fencer{okFencer}
	hooks := &election.Hooks{}
	cfg := election.ElectionConfig{Cluster: "c", Name: "billing", Fencers: fencers, Hooks: hooks}
	before := cfg
	_, err := election.NewElection(nil, kv, w, cfg)
	require.NoError(t, err)
	assert.Equal(t, before, cfg)
	assert.Zero(t, cfg.ResignTimeout, "the caller's config keeps its zero fields")
	assert.Same(t, hooks, cfg.Hooks)
}

// okFencer is a fencer that admits every token.
var okFencer = fence.FencerFunc(func(context.Context, fence.Token) error { return nil })

// nilLogger is a Logger type whose nil pointer is a typed nil.
type nilLogger struct{ hclog.Logger }

// TestTypedNilConfig: every interface-typed field of SessionConfig and
// ElectionConfig refuses a typed nil with ErrInvalidConfig, and a plain nil
// keeps its default.
func TestTypedNilConfig(t *testing.T) {
	var (
		logger hclog.Logger          = (*nilLogger)(nil)
		clk    clockwork.Clock       = (*clockwork.FakeClock)(nil)
		reg    prometheus.Registerer = (*prometheus.Registry)(nil)
		base                         = election.ElectionConfig{Cluster: "c", Name: "job"}
	)
	for name, cfg := range map[string]election.SessionConfig{
		"session logger": {Logger: logger},
		"session clock":  {Clock: clk},
	} {
		err := cfg.Validate()
		require.ErrorIs(t, err, election.ErrInvalidConfig, name)
		assert.Contains(t, err.Error(), "is a nil", name)
	}
	for name, edit := range map[string]func(*election.ElectionConfig){
		"election logger":  func(c *election.ElectionConfig) { c.Logger = logger },
		"election clock":   func(c *election.ElectionConfig) { c.Clock = clk },
		"election metrics": func(c *election.ElectionConfig) { c.Metrics = reg },
	} {
		cfg := base
		edit(&cfg)
		require.ErrorIs(t, cfg.Validate(), election.ErrInvalidConfig, name)
	}
	require.NoError(t, election.SessionConfig{}.Validate())
	require.NoError(t, base.Validate())
}
