package scenario

import (
	"context"
	"fmt"
	"time"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/internal/clock"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/sim/memetcd"
)

type ownerNode struct {
	id    string
	cli   *memetcd.Client
	store *etcdfence.Store
	node  *ownership.Node
}

// staleOwnerUntouchedKey: owner O reads key k and stalls (its client cut
// off); N takes the partition over and loads k (reads, not yet written);
// O resumes and writes; N then writes what it computed from its load.
// Off: nodes without Fencers (N's floor is raised only by its first write,
// so O's write lands and N overwrites it: a lost update). On: Fencers
// (the floor is raised before N serves: O's write is refused).
func staleOwnerUntouchedKey(protected bool) (Outcome, error) {
	e, err := newEnv()
	if err != nil {
		return Outcome{}, err
	}
	defer e.close()
	ctx := e.ctx
	var nodes []*ownerNode
	e.onClose(func() {
		for _, n := range nodes {
			e.srv.Heal(n.cli.ID())
			cctx, ccancel := clock.WithTimeout(context.Background(), e.fc, time.Minute)
			_ = n.node.Close(cctx)
			ccancel()
		}
	})
	var out Outcome
	for _, id := range []string{"a", "b"} {
		n := &ownerNode{id: id, cli: e.client()}
		n.store, err = etcdfence.New(n.cli, etcdfence.Config{Cluster: clusterName, Prefix: dataPrefix})
		if err != nil {
			return out, err
		}
		cfg := ownership.DefaultConfig()
		cfg.Cluster, cfg.NodeID, cfg.Clock = clusterName, id, e.fc
		cfg.Ring.Partitions = 1
		cfg.Session.TTL = ttl
		if protected {
			cfg.Fencers = []fence.Fencer{n.store}
		}
		cfg.Callbacks = ownership.Callbacks{
			OnAcquired: func(ev ownership.Event) { e.rec.BeginTenure(ev.Token.Scope, ev.Token.Epoch, id, e.now()) },
			OnReleased: func(ev ownership.Event) { e.rec.EndTenure(ev.Token.Scope, ev.Token.Epoch, id, e.now()) },
		}
		jctx, jcancel := clock.WithTimeout(ctx, e.fc, time.Minute)
		n.node, err = ownership.Join(jctx, n.cli, cfg)
		jcancel()
		if err != nil {
			return out, err
		}
		nodes = append(nodes, n)
	}
	var o, nn *ownerNode
	if !e.waitFor(5*ttl, func() bool {
		for i, n := range nodes {
			if len(n.node.Owned()) == 1 {
				o, nn = n, nodes[1-i]
				return true
			}
		}
		return false
	}) {
		return out, fmt.Errorf("nobody owns the partition")
	}
	ho, err := o.node.Hold("k")
	if err != nil {
		return out, err
	}
	defer ho.Release()
	readO, err := e.fencedRead(o.store, ho.Token, "k")
	if err != nil {
		return out, err
	}
	e.srv.Partition(o.cli.ID())
	if !e.waitFor(5*ttl, func() bool { return len(nn.node.Owned()) == 1 }) {
		return out, fmt.Errorf("%s never took over", nn.id)
	}
	hn, err := nn.node.Hold("k")
	if err != nil {
		return out, err
	}
	defer hn.Release()
	readN, err := e.fencedRead(nn.store, hn.Token, "k") // N loads k; it has not written it
	if err != nil {
		return out, err
	}
	e.srv.Heal(o.cli.ID())
	if err := e.fencedIncr(o.id, o.store, ho.Token, "k", readO); err != nil {
		return out, err
	}
	if err := e.fencedIncr(nn.id, nn.store, hn.Token, "k", readN); err != nil {
		return out, err
	}
	out.Notes = append(out.Notes, fmt.Sprintf("stale owner %s (epoch %d) wrote after %s (epoch %d) loaded the key", o.id, ho.Token.Epoch, nn.id, hn.Token.Epoch))
	out.Report, err = e.report(e.finalFenced("k"))
	return out, err
}
