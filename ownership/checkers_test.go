package ownership

import (
	"github.com/tenure-go/tenure/fence"

	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/keys"
)

// claimChecker watches a cluster's claims from revision 1 and checks, at
// every revision, that a claim is only created (CreateRevision == 0) or
// handed over to another holder, never rewritten by its holder, and that
// the epochs (keys.ClaimEpoch) of successive claims of a partition
// strictly increase.
type claimChecker struct {
	layout keys.Layout
	cli    *clientv3.Client
	ctx    context.Context // of the watch: RequestProgress reaches it
	cancel context.CancelFunc
	done   chan struct{}

	mu         sync.Mutex
	cur        map[int]int64     // partition -> epoch of the live claim
	last       map[int]int64     // partition -> epoch of the latest claim
	created    map[string]string // "p@epoch" -> owner
	rev        int64             // of the latest claim event
	seen       int64             // of the latest progress notification: every claim event up to it has been applied
	violations []string
}

func startClaimChecker(t *testing.T, cli *clientv3.Client, cluster string) *claimChecker {
	ctx, cancel := context.WithCancel(context.Background())
	k := &claimChecker{
		layout:  keys.New(cluster),
		cli:     cli,
		ctx:     ctx,
		cancel:  cancel,
		done:    make(chan struct{}),
		cur:     map[int]int64{},
		last:    map[int]int64{},
		created: map[string]string{},
	}
	wch := cli.Watch(ctx, k.layout.Claims(), clientv3.WithPrefix(), clientv3.WithRev(1))
	go func() {
		defer close(k.done)
		for resp := range wch {
			if err := resp.Err(); err != nil {
				k.violate("watch failed: %v", err)
				return
			}
			k.apply(resp.Events)
			if resp.IsProgressNotify() {
				k.mu.Lock()
				k.seen = max(k.seen, resp.Header.Revision)
				k.mu.Unlock()
			}
		}
	}()
	t.Cleanup(k.stop)
	return k
}

func (k *claimChecker) violate(format string, args ...any) {
	k.violations = append(k.violations, fmt.Sprintf(format, args...))
}

func (k *claimChecker) apply(events []*clientv3.Event) {
	k.mu.Lock()
	defer k.mu.Unlock()
	for _, ev := range events {
		kv := ev.Kv
		if kv.ModRevision < k.rev {
			k.violate("revision went back from %d to %d", k.rev, kv.ModRevision)
		}
		k.rev = kv.ModRevision
		p, ok := k.layout.ClaimPartition(string(kv.Key))
		if !ok {
			k.violate("bad claim key %q", kv.Key)
			continue
		}
		if ev.Type == clientv3.EventTypeDelete {
			if _, live := k.cur[p]; !live {
				k.violate("rev %d: delete of absent claim %d", kv.ModRevision, p)
			}
			delete(k.cur, p)
			continue
		}
		epoch, owner := keys.ClaimEpoch(kv), keys.DecodeClaim(kv.Value).Node
		if e, live := k.cur[p]; live {
			// Only a hand-over rewrites a claim: to another holder.
			if prev := k.created[fmt.Sprintf("%d@%d", p, e)]; prev == owner {
				k.violate("rev %d: claim %d of %s rewritten by its holder at epoch %d (value %q, version %d)", kv.ModRevision, p, owner, e, kv.Value, kv.Version)
			}
		} else if kv.CreateRevision != kv.ModRevision || kv.Version != 1 {
			k.violate("rev %d: claim %d modified, not created: create %d version %d", kv.ModRevision, p, kv.CreateRevision, kv.Version)
		}
		if kv.Lease == 0 {
			k.violate("rev %d: claim %d without a lease", kv.ModRevision, p)
		}
		if e := k.last[p]; epoch <= e {
			k.violate("rev %d: claim %d epoch %d not above previous epoch %d", kv.ModRevision, p, epoch, e)
		}
		k.cur[p] = epoch
		k.last[p] = epoch
		k.created[fmt.Sprintf("%d@%d", p, epoch)] = owner
	}
}

// sync waits until the checker has seen every claim event up to revision
// rev: until a progress notification of the watch, which etcd sends only
// once the watch has delivered every event up to its revision, is of rev
// or later. (The revision of the last claim event would not do: the
// writes up to rev need not touch a claim.)
func (k *claimChecker) sync(t *testing.T, rev int64) {
	t.Helper()
	require.Eventually(t, func() bool {
		k.mu.Lock()
		done := k.seen >= rev || len(k.violations) > 0
		k.mu.Unlock()
		if !done {
			_ = k.cli.RequestProgress(k.ctx)
		}
		return done
	}, 30*time.Second, 10*time.Millisecond)
}

func (k *claimChecker) stop() {
	k.cancel()
	<-k.done
}

// tenureLog records a node's callbacks and checks their order per partition.
type tenureLog struct {
	mu         sync.Mutex
	node       string
	open       map[int]fence.Token
	acquired   []fence.Token
	violations []string
}

func newTenureLog(node string) *tenureLog {
	return &tenureLog{node: node, open: map[int]fence.Token{}}
}

func (l *tenureLog) callbacks() Callbacks {
	return Callbacks{
		OnAcquired: func(e Event) {
			ctx, p, t := e.Context, e.Partition, e.Token
			l.mu.Lock()
			defer l.mu.Unlock()
			if o, ok := l.open[p]; ok {
				l.violations = append(l.violations, fmt.Sprintf("%s: acquired %v while %v open", l.node, t, o))
			}
			if ctx.Err() == nil {
				if tok, _ := fence.FromContext(ctx); tok != t {
					l.violations = append(l.violations, fmt.Sprintf("%s: context carries %v, not %v", l.node, tok, t))
				}
			}
			l.open[p] = t
			l.acquired = append(l.acquired, t)
		},
		OnReleased: func(e Event) {
			p, t, r := e.Partition, e.Token, e.Reason
			l.mu.Lock()
			defer l.mu.Unlock()
			if o, ok := l.open[p]; !ok || o != t {
				l.violations = append(l.violations, fmt.Sprintf("%s: released %v (%v) while %v open", l.node, t, r, o))
			}
			delete(l.open, p)
		},
	}
}
