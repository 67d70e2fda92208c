package ownership

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/ownership/ring"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestInvariantsUnderChaos runs nodes through random joins, graceful
// leaves, abrupt kills, etcd leader restarts and blackholes, and checks
// that etcd never holds two claims for a partition, that epochs strictly
// increase, that every tenure a node served was a claim it created in etcd,
// and that once the chaos stops every partition is served by its ring
// owner. TENURE_CHAOS_SEED replays a run; TENURE_CHAOS_DURATION sets its
// length (default 20s).
func TestInvariantsUnderChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("chaos test skipped in -short mode")
	}
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("TENURE_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err)
		seed = v
	}
	duration := 20 * time.Second
	if s := os.Getenv("TENURE_CHAOS_DURATION"); s != "" {
		d, err := time.ParseDuration(s)
		require.NoError(t, err)
		duration = d
	}
	t.Logf("seed %d (TENURE_CHAOS_SEED to replay), duration %v", seed, duration)
	rng := rand.New(rand.NewPCG(seed, 0x7e5e))

	const name, parts, maxNodes = "chaos", 64, 5
	c := cluster.New(t, 3)
	observer := c.NewClient(t)
	checker := startClaimChecker(t, observer, name)
	ctx := context.Background()

	type proc struct {
		id  string
		n   *Node
		cli *clientv3.Client
		fp  *cluster.FaultPoint
		log *tenureLog
	}
	var live, stopped []*proc
	var logs []*tenureLog
	seq := 0
	start := func() {
		id := fmt.Sprintf("n%d", seq)
		seq++
		cli, fp := c.NewFaultyClient(t)
		cfg := testConfig(t, name, id, parts)
		cfg.DrainTimeout = time.Second
		tl := newTenureLog(id)
		cfg.Callbacks = tl.callbacks()
		jctx, cancel := context.WithTimeout(ctx, 20*time.Second)
		n, err := Join(jctx, cli, cfg)
		cancel()
		if err != nil { // etcd may be electing a leader
			t.Logf("join %s: %v", id, err)
			_ = cli.Close()
			return
		}
		logs = append(logs, tl)
		live = append(live, &proc{id: id, n: n, cli: cli, fp: fp, log: tl})
	}
	pick := func() *proc {
		i := rng.IntN(len(live))
		p := live[i]
		live = slices.Delete(live, i, i+1)
		return p
	}
	defer func() {
		for _, p := range append(live, stopped...) {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			_ = p.n.Close(cctx)
			cancel()
		}
	}()
	for range 3 {
		start()
	}

	counts := map[string]int{}
	end := time.Now().Add(duration)
	for time.Now().Before(end) {
		switch a := rng.IntN(10); {
		case a < 3:
			if len(live) < maxNodes {
				counts["join"]++
				start()
			}
		case a < 4:
			if len(live) > 1 {
				counts["leave"]++
				p := pick()
				cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				if err := p.n.Close(cctx); err != nil {
					t.Logf("close %s: %v", p.id, err)
				}
				cancel()
				stopped = append(stopped, p)
			}
		case a < 5:
			if len(live) > 1 {
				counts["kill"]++
				p := pick()
				_ = p.cli.Close() // the process is gone as far as etcd can tell
				stopped = append(stopped, p)
			}
		case a < 6:
			counts["leader restart"]++
			lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
			i, err := c.StopLeader(lctx)
			require.NoError(t, err)
			require.NoError(t, c.RestartMember(lctx, i))
			cancel()
		case a < 8:
			if len(live) > 0 {
				counts["blackhole"]++
				p := live[rng.IntN(len(live))]
				p.fp.Blackhole()
				time.Sleep(time.Duration(200+rng.IntN(2800)) * time.Millisecond)
				p.fp.Heal()
			}
		default:
			time.Sleep(time.Duration(50+rng.IntN(700)) * time.Millisecond)
		}
	}
	if len(live) == 0 {
		start()
	}
	t.Logf("actions %v; %d nodes live", counts, len(live))

	// Once stable, every partition is served by its ring owner...
	nodes := make([]*Node, len(live))
	ids := make([]string, len(live))
	for i, p := range live {
		nodes[i], ids[i] = p.n, p.id
	}
	slices.Sort(ids)
	waitStable(t, 90*time.Second, nodes...)

	// ...and etcd agrees.
	require.Equal(t, ids, etcdMembers(t, observer, name))
	ring, err := ring.New(ids, ring.Config{Partitions: parts, LoadFactor: ring.DefaultConfig().LoadFactor})
	require.NoError(t, err)
	claims := etcdClaims(t, observer, name)
	require.Len(t, claims, parts)
	for p, cl := range claims {
		owner, _ := ring.Owner(p)
		require.Equal(t, owner, cl.Owner, "partition %d", p)
	}
	resp, err := observer.Get(ctx, "/")
	require.NoError(t, err)
	checker.sync(t, resp.Header.Revision)
	checker.stop()

	checker.mu.Lock()
	defer checker.mu.Unlock()
	require.Empty(t, checker.violations)
	t.Logf("%d claims created over %d revisions", len(checker.created), checker.rev)
	for _, l := range logs {
		l.mu.Lock()
		assert.Empty(t, l.violations)
		for _, tok := range l.acquired {
			var p int
			_, err := fmt.Sscanf(tok.Scope, "p/%d", &p)
			require.NoError(t, err)
			owner, ok := checker.created[fmt.Sprintf("%d@%d", p, tok.Epoch)]
			assert.True(t, ok && owner == l.node, "%s served %v, which etcd never gave it (owner %q)", l.node, tok, owner)
		}
		l.mu.Unlock()
	}
}
