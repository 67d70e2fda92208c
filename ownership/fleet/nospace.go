package fleet

import (
	"context"
	"fmt"
	"time"

	"github.com/jonboulle/clockwork"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/internal/clock"
	"github.com/tenure-go/tenure/internal/etcderr"
)

// noSpaceRetry is how often an Operator's action that etcd refused for its
// NOSPACE alarm is tried again: how long, at most, after the alarm is
// disarmed, the action is taken.
const noSpaceRetry = 500 * time.Millisecond

// waitingKV is the etcd client of an Operator: its transactions, which
// every action is, wait while etcd refuses them for its NOSPACE alarm
// (every action puts its audit record), and are tried again every
// noSpaceRetry until the alarm is disarmed or the action's context ends.
type waitingKV struct {
	clientv3.KV
	clock clockwork.Clock
}

func (kv waitingKV) Txn(ctx context.Context) clientv3.Txn {
	return &waitingTxn{Txn: kv.KV.Txn(ctx), ctx: ctx, clock: kv.clock}
}

// waitingTxn is a transaction of waitingKV.
type waitingTxn struct {
	clientv3.Txn
	ctx   context.Context
	clock clockwork.Clock
}

func (t *waitingTxn) If(cs ...clientv3.Cmp) clientv3.Txn   { t.Txn = t.Txn.If(cs...); return t }
func (t *waitingTxn) Then(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Then(ops...); return t }
func (t *waitingTxn) Else(ops ...clientv3.Op) clientv3.Txn { t.Txn = t.Txn.Else(ops...); return t }

// Commit commits the transaction, again every noSpaceRetry while etcd
// refuses it for its NOSPACE alarm. If the context ends first, the error
// wraps ErrNoSpace and etcd's refusal.
func (t *waitingTxn) Commit() (*clientv3.TxnResponse, error) {
	for {
		resp, err := t.Txn.Commit()
		if !etcderr.NoSpace(err) {
			return resp, err
		}
		if !clock.Sleep(t.ctx, t.clock, noSpaceRetry) {
			return nil, fmt.Errorf("%w: waited until the context ended: %w", ErrNoSpace, err)
		}
	}
}
