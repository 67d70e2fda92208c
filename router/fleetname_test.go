package router_test

import (
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/internal/keys"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/router"
)

// TestFleetNameConsistent: every configuration that names a fleet (by a
// cluster name or a key prefix) accepts and refuses the same names, by
// keys.CheckFleet's rule: a node's ownership.Config, its election, its
// etcd fence store, a router Client, an Observer and an Operator. A name
// one of them took and another refused would let a caller configure a
// client of a fleet that no node can join. Each refusal wraps the
// configuring package's ErrInvalidConfig and says CheckFleet's reason,
// which names the field and its value.
func TestFleetNameConsistent(t *testing.T) {
	configs := []struct {
		name     string
		invalid  error
		validate func(cluster, prefix string) error
	}{
		{"ownership.Config", ownership.ErrInvalidConfig, func(c, p string) error {
			cfg := ownership.DefaultConfig()
			cfg.Cluster, cfg.Prefix, cfg.NodeID = c, p, "n1"
			return cfg.Validate()
		}},
		{"fleet.ObserverConfig", fleet.ErrInvalidConfig, func(c, p string) error {
			return fleet.ObserverConfig{Cluster: c, Prefix: p, Ring: ring.DefaultConfig()}.Validate()
		}},
		{"fleet.OperatorConfig", fleet.ErrInvalidConfig, func(c, p string) error {
			return fleet.OperatorConfig{Cluster: c, Prefix: p}.Validate()
		}},
		{"election.ElectionConfig", election.ErrInvalidConfig, func(c, p string) error {
			cfg := election.DefaultElectionConfig()
			cfg.Name, cfg.Cluster, cfg.Prefix = "leader", c, p
			return cfg.Validate()
		}},
		{"etcdfence.Config", etcdfence.ErrInvalidConfig, func(c, p string) error {
			return etcdfence.Config{Cluster: c, ClusterPrefix: p}.Validate()
		}},
		{"router.ClientConfig", router.ErrInvalidConfig, func(c, p string) error {
			return router.ClientConfig{Cluster: c, Prefix: p}.Validate()
		}},
	}
	names := []struct {
		cluster, prefix string
		ok              bool
	}{
		{"", "", false},
		{"a/b", "", false},
		{"a\x00b", "", false},
		{"ok", "", true},
		{"", "/x\x00/", false},
		{"", "/x/", true},
		{"ok", "/x/", true},
		{"ok", "/x\x00/", false},
		{"a/b", "/x/", false},
	}
	for _, n := range names {
		want := keys.CheckFleet(n.cluster, n.prefix)
		require.Equal(t, n.ok, want == nil, "the table and keys.CheckFleet disagree on cluster %q, prefix %q", n.cluster, n.prefix)
		for _, c := range configs {
			t.Run(fmt.Sprintf("%s/cluster=%q/prefix=%q", c.name, n.cluster, n.prefix), func(t *testing.T) {
				err := c.validate(n.cluster, n.prefix)
				if n.ok {
					assert.NoError(t, err)
					return
				}
				require.ErrorIs(t, err, c.invalid)
				if errors.Is(err, etcdfence.ErrNoFleet) && errors.Is(want, keys.ErrNoCluster) {
					return // etcdfence's documented refusal of a Config that names no fleet
				}
				assert.ErrorContains(t, err, want.Error())
			})
		}
	}
}
