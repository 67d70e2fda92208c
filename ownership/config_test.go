package ownership

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/ownership/ring"
)

// TestConfigErrorMessages: a nested error says each package prefix once,
// and errors.Is still matches every sentinel involved.
func TestConfigErrorMessages(t *testing.T) {
	good := func() Config {
		cfg := DefaultConfig()
		cfg.Cluster, cfg.NodeID = "c", "n1"
		return cfg
	}
	tests := []struct {
		name  string
		edit  func(*Config)
		want  string
		wants []error
	}{
		{"session TTL", func(c *Config) { c.Session.TTL = time.Second },
			"ownership: invalid config: session: TTL 1s must be at least 2s", []error{election.ErrInvalidConfig}},
		{"zero partitions", func(c *Config) { c.Ring.Partitions = 0 },
			"ownership: invalid config: ring: partition count 0 must be > 0", []error{ring.ErrInvalidPartitions}},
		{"too many partitions", func(c *Config) { c.Ring.Partitions = ring.MaxPartitions + 1 },
			"ownership: invalid config: ring: partition count 1048577 must be <= 1048576", []error{ring.ErrInvalidPartitions}},
		{"load factor", func(c *Config) { c.Ring.LoadFactor = 0.5 },
			"ownership: invalid config: ring: load factor 0.5 must be a finite number >= 1", []error{ring.ErrInvalidLoadFactor}},
		{"empty node ID", func(c *Config) { c.NodeID = "" },
			"ownership: invalid config: node ID: empty", []error{ring.ErrInvalidNodeID}},
		{"node ID with space", func(c *Config) { c.NodeID = "a b" },
			`ownership: invalid config: node ID: "a b" has forbidden character ' ' at byte 1`, []error{ring.ErrInvalidNodeID}},
		{"drain timeout", func(c *Config) { c.DrainTimeout = -time.Second },
			"ownership: invalid config: drain timeout -1s must not be negative", nil},
		{"no cluster", func(c *Config) { c.Cluster = "" },
			"ownership: invalid config: Cluster or Prefix must be set", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := good()
			tt.edit(&cfg)
			err := cfg.Validate()
			require.Error(t, err)
			assert.Equal(t, tt.want, err.Error())
			require.ErrorIs(t, err, ErrInvalidConfig)
			for _, w := range tt.wants {
				require.ErrorIs(t, err, w)
			}
		})
	}
	// On their own, the ring's and the node ID's errors say their own
	// sentinel once.
	assert.Equal(t, "ring: invalid partition count: partition count 0 must be > 0", ring.Config{LoadFactor: 1}.Validate().Error())
	assert.Equal(t, "ring: invalid node ID: empty", ring.ValidateNodeID("").Error())
	_, err := ring.New([]string{"a"}, ring.Config{Partitions: -1, LoadFactor: 1})
	require.ErrorIs(t, err, ring.ErrInvalidPartitions)
}

// nilFencer is a fence.Fencer whose nil pointer must be refused.
type nilFencer struct{}

func (*nilFencer) Advance(context.Context, fence.Token) error { return nil }

// TestTypedNil: every interface-typed argument and Config field refuses a
// nil pointer (a typed nil) with a typed error, instead of panicking on its
// first use.
func TestTypedNil(t *testing.T) {
	good := func() Config {
		cfg := DefaultConfig()
		cfg.Cluster, cfg.NodeID = "c", "n1"
		return cfg
	}
	var (
		nilCli    *clientv3.Client
		nilLogger hclog.Logger    = (*logger)(nil)
		nilClock  clockwork.Clock = (*clockwork.FakeClock)(nil)
		nilCtx    context.Context
	)
	tests := []struct {
		name string
		run  func() error
		want error
		msg  string
	}{
		{"client", func() error { _, err := Join(context.Background(), nilCli, good()); return err }, ErrNilArgument, "ownership: nil argument: etcd client"},
		{"untyped client", func() error { _, err := Join(context.Background(), nil, good()); return err }, ErrNilArgument, "ownership: nil argument: etcd client"},
		{"context", func() error { _, err := Join(nilCtx, nil, good()); return err }, ErrNilArgument, "ownership: nil argument: context"},
		{"fencer", func() error {
			c := good()
			c.Fencers = []fence.Fencer{fence.FencerFunc(nil)}
			return c.Validate()
		}, ErrInvalidConfig, "ownership: invalid config: fencer 0 is nil (fence.FencerFunc)"},
		{"fencer pointer", func() error {
			c := good()
			c.Fencers = []fence.Fencer{(*nilFencer)(nil)}
			return c.Validate()
		}, ErrInvalidConfig, "ownership: invalid config: fencer 0 is nil (*ownership.nilFencer)"},
		{"logger", func() error { c := good(); c.Logger = nilLogger; return c.Validate() }, ErrInvalidConfig, "ownership: invalid config: logger is a nil *ownership.logger"},
		{"clock", func() error { c := good(); c.Clock = nilClock; return c.Validate() }, ErrInvalidConfig, "ownership: invalid config: clock is a nil *clockwork.FakeClock"},
		{"session clock", func() error { c := good(); c.Session.Clock = nilClock; return c.Validate() }, ErrInvalidConfig, "ownership: invalid config: session: clock is a nil *clockwork.FakeClock"},
		{"session logger", func() error { c := good(); c.Session.Logger = nilLogger; return c.Validate() }, ErrInvalidConfig, "ownership: invalid config: session: logger is a nil *ownership.logger"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = tt.run() })
			require.ErrorIs(t, err, tt.want)
			assert.Equal(t, tt.msg, err.Error())
		})
	}
	// Nil callbacks are skipped: a Callbacks with nil funcs is valid.
	c := good()
	c.Callbacks = Callbacks{OnAcquired: nil, OnReleased: nil}
	require.NoError(t, c.Validate())
}

// logger is an hclog.Logger whose nil pointer must be refused.
type logger struct{ hclog.Logger }
