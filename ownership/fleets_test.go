package ownership

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/sim/cluster"
)

// fleetStore returns the etcdfence.Store of the fleet named cluster,
// configured as the README documents: DefaultConfig with the fleet's name.
func fleetStore(t *testing.T, cli *clientv3.Client, cluster string) *etcdfence.Store {
	t.Helper()
	cfg := etcdfence.DefaultConfig()
	cfg.Cluster = cluster
	store, err := etcdfence.New(cli, cfg)
	require.NoError(t, err)
	return store
}

// requireOwnersWrite has the owner of every partition, as nodes see it,
// write under its token through store: every write is admitted.
func requireOwnersWrite(t *testing.T, store *etcdfence.Store, parts int, nodes ...*Node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for p := range parts {
		for _, n := range nodes {
			r := n.LookupPartition(p)
			if !r.Local {
				continue
			}
			tok := fence.Token{Scope: fence.PartitionScope(p), Epoch: r.Epoch}
			_, err := store.Put(ctx, tok, fmt.Sprintf("k/%d", p), []byte(n.ID()))
			require.NoError(t, err, "owner %s of partition %d at epoch %d", n.ID(), p, r.Epoch)
		}
	}
}

// TestTwoFleetsOneEtcd: two fleets on one etcd, each with its store
// configured as documented, move their partitions in turn (a node joins,
// another leaves); each fleet's owners keep writing, never refused by the
// other fleet's new epochs.
func TestTwoFleetsOneEtcd(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	const parts = 4
	type fleet struct {
		name  string
		store *etcdfence.Store
		nodes []*Node
	}
	fleets := []*fleet{{name: "blue"}, {name: "green"}}
	start := func(f *fleet, id string) {
		cfg := testConfig(t, f.name, id, parts)
		cfg.Fencers = []fence.Fencer{f.store}
		f.nodes = append(f.nodes, join(t, cli, cfg))
		waitStable(t, 30*time.Second, f.nodes...)
	}
	check := func(step string) {
		for _, f := range fleets {
			t.Run(step+"/"+f.name, func(t *testing.T) { requireOwnersWrite(t, f.store, parts, f.nodes...) })
		}
	}
	for _, f := range fleets {
		f.store = fleetStore(t, c.NewClient(t), f.name)
		start(f, "a")
	}
	check("joined")
	for _, f := range fleets { // each fleet's moves give it newer epochs than the other's
		start(f, "b")
		check("b joined " + f.name)
	}
	for _, f := range fleets {
		closeNode(t, f.nodes[0])
		f.nodes = f.nodes[1:]
		waitStable(t, 30*time.Second, f.nodes...)
		check("a left " + f.name)
	}
}

// TestJoinRefusesForeignStore: a node refuses at Join an etcdfence.Store
// whose floors are another fleet's, before it registers anything; a store
// of its own fleet, named by Cluster or by the same Prefix, is accepted.
func TestJoinRefusesForeignStore(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	cfg := testConfig(t, "mine", "a", 4)
	cfg.Fencers = []fence.Fencer{fleetStore(t, cli, "theirs")}
	_, err := Join(ctx, cli, cfg)
	require.ErrorIs(t, err, ErrForeignFencer)
	require.ErrorIs(t, err, ErrInvalidConfig)
	require.ErrorIs(t, cfg.Validate(), ErrForeignFencer)
	resp, err := cli.Get(ctx, "/tenure/mine/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	require.NoError(t, err)
	require.Zero(t, resp.Count, "a refused Join writes nothing")

	byPrefix, err := etcdfence.New(cli, etcdfence.Config{ClusterPrefix: "/custom"})
	require.NoError(t, err)
	cfg.Cluster, cfg.Prefix = "", "/custom/"
	cfg.Fencers = []fence.Fencer{byPrefix}
	require.NoError(t, cfg.Validate())
	cfg.Fencers = []fence.Fencer{fleetStore(t, cli, "mine")}
	require.ErrorIs(t, cfg.Validate(), ErrForeignFencer, "a Prefix overrides the Cluster's prefix")

	cfg.Cluster, cfg.Prefix = "mine", ""
	join(t, cli, cfg)
}
