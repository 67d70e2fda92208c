package memetcd_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/require"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/tenure-go/tenure/sim/cluster"
	"github.com/tenure-go/tenure/sim/memetcd"
)

// etcdAPI is what the conformance test drives: a *clientv3.Client or a
// *memetcd.Client.
type etcdAPI interface {
	clientv3.KV
	clientv3.Lease
	clientv3.Watcher
}

// conformanceSeeds and conformanceOps size the default run.
var conformanceSeeds = []uint64{1, 2, 3, 4, 5, 6}

const conformanceOps = 300

// TestConformance runs the same seeded random operation sequences against a
// real embedded etcd (sim/cluster) and against memetcd, and requires
// identical normalized results: responses with revisions relative to the
// sequence's first revision, lease IDs by order of grant, error kinds, and
// every watch's event stream.
func TestConformance(t *testing.T) {
	c := cluster.New(t, 1)
	real := c.NewClient(t)
	start := time.Now()
	total := 0
	for i, seed := range conformanceSeeds {
		prefix := fmt.Sprintf("/conf/%03d/", i)
		ops := genOps(seed, conformanceOps)
		total += len(ops)

		want := runOps(t, real, prefix, ops)

		srv, err := memetcd.New(memetcd.Config{Clock: clockwork.NewFakeClock(), MinLeaseTTL: time.Second})
		require.NoError(t, err)
		mc := srv.NewClient()
		got := runOps(t, mc, prefix, ops)
		require.NoError(t, mc.Close())
		srv.Close()

		compareLogs(t, seed, want, got)
	}
	t.Logf("%d seeds, %d operations, identical results (%v)", len(conformanceSeeds), total, time.Since(start).Round(time.Millisecond))
}

func compareLogs(t *testing.T, seed uint64, want, got []string) {
	t.Helper()
	for i := range max(len(want), len(got)) {
		var w, g string
		if i < len(want) {
			w = want[i]
		}
		if i < len(got) {
			g = got[i]
		}
		if w != g {
			if dir := os.Getenv("MEMETCD_DUMP"); dir != "" {
				_ = os.WriteFile(dir+"/etcd.txt", []byte(strings.Join(want, "\n")), 0o644)
				_ = os.WriteFile(dir+"/memetcd.txt", []byte(strings.Join(got, "\n")), 0o644)
			}
			lo := max(0, i-3)
			t.Fatalf("seed %d: results differ at line %d\ncontext:\n  %s\netcd:    %s\nmemetcd: %s", seed, i, strings.Join(want[lo:i], "\n  "), w, g)
		}
	}
}

type opKind int

const (
	opPut opKind = iota
	opGet
	opDelete
	opTxn
	opGrant
	opGrantSmall
	opKeepAlive
	opRevoke
	opTTL
	opLeases
	opCompact
	opWatch
	opTooManyOps
	opGetStream
	numOps
)

// op is one generated operation, in terms that both runs resolve the same
// way: keys relative to the prefix, revisions relative to the current one,
// leases by grant order.
type op struct {
	kind  opKind
	key   keySel
	val   string
	lease int // index of a granted lease; -1 none; -2 an unknown ID
	flags int // option bits, meaning per kind
	rev   int // revision selector
	ttl   int64
	sort  [2]int32
	limit int64
	txn   *txnGen
}

type keySel struct {
	kind int // 0 key, 1 prefix, 2 range, 3 from key
	a, b string
}

type txnGen struct {
	cmps      []cmpGen
	then, els []op
}

type cmpGen struct {
	prefix string // compare every key under it instead of key
	key    string
	target int
	result string
	val    int64
	sval   string
}

var (
	testKeys  = []string{"a/0", "a/1", "a/2", "a/3", "b/0", "b/1", "b/2", "b/3"}
	prefixSel = []string{"a/", "b/", ""}
)

func genKey(r *rand.Rand) string { return testKeys[r.IntN(len(testKeys))] }

func genSel(r *rand.Rand, allowFromKey bool) keySel {
	switch n := r.IntN(10); {
	case n < 5:
		return keySel{kind: 0, a: genKey(r)}
	case n < 8:
		return keySel{kind: 1, a: prefixSel[r.IntN(len(prefixSel))]}
	case n < 9 || !allowFromKey:
		a, b := genKey(r), genKey(r)
		return keySel{kind: 2, a: min(a, b), b: max(a, b)}
	default:
		return keySel{kind: 3, a: genKey(r)}
	}
}

func genOps(seed uint64, n int) []op {
	r := rand.New(rand.NewPCG(seed, 0x6d656d))
	ops := make([]op, 0, n)
	leases := 0
	for len(ops) < n {
		o := genOp(r, &leases, 0)
		ops = append(ops, o)
	}
	return ops
}

func genLease(r *rand.Rand, leases int) int {
	switch n := r.IntN(10); {
	case n < 4 || leases == 0:
		if n == 0 {
			return -2
		}
		return -1
	default:
		return r.IntN(leases)
	}
}

func genOp(r *rand.Rand, leases *int, depth int) op {
	weights := []int{opPut: 20, opGet: 18, opDelete: 8, opTxn: 16, opGrant: 4, opGrantSmall: 1, opKeepAlive: 3, opRevoke: 3, opTTL: 3, opLeases: 1, opCompact: 2, opWatch: 4, opTooManyOps: 1, opGetStream: 2}
	if depth > 0 { // inside a transaction: KV only
		weights = []int{opPut: 10, opGet: 8, opDelete: 4, opTxn: 3}
	}
	sum := 0
	for _, w := range weights {
		sum += w
	}
	x := r.IntN(sum)
	kind := opKind(0)
	for i, w := range weights {
		if x < w {
			kind = opKind(i)
			break
		}
		x -= w
	}
	o := op{kind: kind, lease: -1, flags: r.IntN(1 << 10), rev: r.IntN(12) - 2}
	switch kind {
	case opPut:
		o.key = keySel{a: genKey(r)}
		o.val = "v" + strconv.Itoa(r.IntN(100))
		o.lease = genLease(r, *leases)
	case opGet, opGetStream:
		o.key = genSel(r, true)
		o.sort = [2]int32{int32(r.IntN(5)), int32(r.IntN(3))}
		o.limit = int64(r.IntN(4))
	case opDelete:
		o.key = genSel(r, depth == 0)
	case opTxn:
		t := &txnGen{}
		for range r.IntN(3) {
			pfx := ""
			if r.IntN(6) == 0 {
				pfx = prefixSel[r.IntN(2)]
			}
			t.cmps = append(t.cmps, cmpGen{prefix: pfx, key: genKey(r), target: r.IntN(5), result: []string{"=", "!=", "<", ">"}[r.IntN(4)], val: int64(r.IntN(6)), sval: "v" + strconv.Itoa(r.IntN(100))})
		}
		maxDepth := 2
		for _, branch := range []*[]op{&t.then, &t.els} {
			for range r.IntN(4) {
				if depth+1 > maxDepth {
					break
				}
				*branch = append(*branch, genOp(r, leases, depth+1))
			}
		}
		o.txn = t
	case opGrant:
		o.ttl = []int64{60, 120, 600, 9000000001}[r.IntN(4)]
		if o.ttl < 9000000001 {
			*leases++
		}
	case opGrantSmall:
		o.ttl = []int64{-3, 0, 1}[r.IntN(3)]
		*leases++
	case opKeepAlive, opRevoke, opTTL:
		o.lease = genLease(r, *leases)
		if o.lease == -1 {
			o.lease = -2
		}
	case opWatch:
		o.key = genSel(r, false)
	}
	return o
}

// env is the state of one run.
type env struct {
	t       *testing.T
	api     etcdAPI
	ctx     context.Context
	prefix  string
	base    int64
	cur     int64
	compact int64 // last successful compaction, absolute
	leases  []clientv3.LeaseID
	names   map[int64]string
	watches []*watchRun
	// unsynced are watches from a past revision that etcd may not have
	// caught up yet; a compaction waits for them (see sync).
	unsynced []*watchRun
	log      []string
}

type watchRun struct {
	name   string
	start  int64
	ctx    context.Context
	cancel context.CancelFunc
	ch     clientv3.WatchChan
	buf    []clientv3.WatchResponse // read while waiting for the sync
	closed bool
}

// sync waits until etcd has caught w up with history (a progress
// notification arrives only then), so that a later compaction cannot
// overtake its catch-up: real etcd catches up asynchronously, memetcd at
// once. Responses read meanwhile are kept for drain.
func (e *env) sync(w *watchRun) {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	_ = e.api.RequestProgress(w.ctx)
	for {
		select {
		case wr, ok := <-w.ch:
			if !ok {
				w.closed = true
				return
			}
			if wr.IsProgressNotify() {
				return
			}
			w.buf = append(w.buf, wr)
			if wr.Err() != nil {
				return
			}
		case <-tick.C:
			_ = e.api.RequestProgress(w.ctx)
		case <-timeout.C:
			e.t.Fatalf("watch %s did not sync", w.name)
		}
	}
}

func runOps(t *testing.T, api etcdAPI, prefix string, ops []op) []string {
	log, _ := runOpsRaw(t, api, prefix, ops)
	return log
}

// runOpsRaw is runOps that also returns the IDs of the leases granted.
func runOpsRaw(t *testing.T, api etcdAPI, prefix string, ops []op) ([]string, []clientv3.LeaseID) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	e := &env{t: t, api: api, ctx: ctx, prefix: prefix, names: make(map[int64]string)}
	resp, err := api.Get(ctx, prefix+"base")
	require.NoError(t, err)
	e.base, e.cur = resp.Header.Revision, resp.Header.Revision
	for i, o := range ops {
		e.log = append(e.log, fmt.Sprintf("%d %s", i, e.exec(o)))
	}
	// A last write that every watch covers, then drain the watches.
	pr, err := api.Put(ctx, prefix+"zz", "end")
	require.NoError(t, err)
	e.seen(pr.Header)
	for _, w := range e.watches {
		e.log = append(e.log, e.drain(w, pr.Header.Revision)...)
		w.cancel()
	}
	for _, id := range e.leases {
		_, _ = api.Revoke(ctx, id)
	}
	return e.log, e.leases
}

func (e *env) key(k string) string { return e.prefix + k }

func (e *env) rel(rev int64) string {
	if rev == 0 {
		return "0"
	}
	return "r" + strconv.FormatInt(rev-e.base, 10)
}

func (e *env) seen(h *pb.ResponseHeader) string {
	if h == nil {
		return "h=nil"
	}
	e.cur = max(e.cur, h.Revision)
	return "h=" + e.rel(h.Revision)
}

func (e *env) leaseName(id int64) string {
	if id == 0 {
		return "-"
	}
	if n, ok := e.names[id]; ok {
		return n
	}
	return "L?"
}

func (e *env) leaseID(i int) clientv3.LeaseID {
	switch {
	case i == -1:
		return 0
	case i == -2 || i >= len(e.leases):
		return 0x12345
	}
	return e.leases[i]
}

// revOf resolves a revision selector: 0 means none, negative values are in
// the future, others count back from the current revision, never below the
// sequence's first.
func (e *env) revOf(sel int) int64 {
	switch {
	case sel == 0:
		return 0
	case sel < 0:
		return e.cur - int64(sel)
	}
	return max(e.base, e.cur-int64(sel-1))
}

func errKind(err error) string {
	var ee rpctypes.EtcdError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &ee):
		return "etcd error: " + ee.Error()
	}
	if s, ok := status.FromError(err); ok {
		return "grpc " + s.Code().String()
	}
	return "error: " + err.Error()
}

func (e *env) kv(kv *mvccpb.KeyValue) string {
	if kv == nil {
		return "nil"
	}
	return fmt.Sprintf("{%s=%q c=%s m=%s v=%d l=%s}", strings.TrimPrefix(string(kv.Key), e.prefix), kv.Value, e.rel(kv.CreateRevision), e.rel(kv.ModRevision), kv.Version, e.leaseName(kv.Lease))
}

func (e *env) kvs(kvs []*mvccpb.KeyValue) string {
	parts := make([]string, len(kvs))
	for i, kv := range kvs {
		parts[i] = e.kv(kv)
	}
	return "[" + strings.Join(parts, " ") + "]"
}

func (e *env) selOpts(s keySel) (string, []clientv3.OpOption) {
	switch s.kind {
	case 1:
		return e.key(s.a), []clientv3.OpOption{clientv3.WithPrefix()}
	case 2:
		return e.key(s.a), []clientv3.OpOption{clientv3.WithRange(e.key(s.b))}
	case 3:
		return e.key(s.a), []clientv3.OpOption{clientv3.WithFromKey()}
	}
	return e.key(s.a), nil
}

// kvOp builds the clientv3.Op of a KV operation.
func (e *env) kvOp(o op) clientv3.Op {
	switch o.kind {
	case opPut:
		var opts []clientv3.OpOption
		if id := e.leaseID(o.lease); id != 0 {
			opts = append(opts, clientv3.WithLease(id))
		}
		if o.flags&1 != 0 {
			opts = append(opts, clientv3.WithPrevKV())
		}
		val := o.val
		switch o.flags >> 6 & 15 {
		case 0:
			opts = append(opts, clientv3.WithIgnoreLease())
		case 1:
			val = ""
			opts = append(opts, clientv3.WithIgnoreValue())
		}
		return clientv3.OpPut(e.key(o.key.a), val, opts...)
	case opGet:
		k, opts := e.selOpts(o.key)
		if rev := e.revOf(o.rev); rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		if o.flags&1 != 0 {
			opts = append(opts, clientv3.WithKeysOnly())
		}
		if o.flags&2 != 0 && o.flags&4 == 0 {
			opts = append(opts, clientv3.WithCountOnly())
		}
		if o.limit > 0 {
			opts = append(opts, clientv3.WithLimit(o.limit))
		}
		if o.flags&8 != 0 {
			opts = append(opts, clientv3.WithSort(clientv3.SortTarget(o.sort[0]), clientv3.SortOrder(o.sort[1])))
		}
		if o.flags&16 != 0 {
			opts = append(opts, clientv3.WithMaxCreateRev(max(e.cur-3, 1)))
		}
		if o.flags&32 != 0 {
			opts = append(opts, clientv3.WithMinModRev(max(e.cur-5, 1)))
		}
		return clientv3.OpGet(k, opts...)
	case opDelete:
		k, opts := e.selOpts(o.key)
		if o.flags&1 != 0 {
			opts = append(opts, clientv3.WithPrevKV())
		}
		return clientv3.OpDelete(k, opts...)
	case opTxn:
		t := o.txn
		cmps := make([]clientv3.Cmp, len(t.cmps))
		for i, c := range t.cmps {
			k := e.key(c.key)
			if c.prefix != "" {
				k = e.key(c.prefix)
			}
			switch c.target {
			case 0:
				cmps[i] = clientv3.Compare(clientv3.Value(k), c.result, c.sval)
			case 1:
				cmps[i] = clientv3.Compare(clientv3.Version(k), c.result, c.val)
			case 2:
				cmps[i] = clientv3.Compare(clientv3.CreateRevision(k), c.result, e.revNear(c.val))
			case 3:
				cmps[i] = clientv3.Compare(clientv3.ModRevision(k), c.result, e.revNear(c.val))
			default:
				cmps[i] = clientv3.Compare(clientv3.LeaseValue(k), c.result, e.leaseID(int(c.val)-1))
			}
			if c.prefix != "" {
				cmps[i] = cmps[i].WithPrefix()
			}
		}
		then := make([]clientv3.Op, len(t.then))
		for i, x := range t.then {
			then[i] = e.kvOp(x)
		}
		els := make([]clientv3.Op, len(t.els))
		for i, x := range t.els {
			els[i] = e.kvOp(x)
		}
		return clientv3.OpTxn(cmps, then, els)
	}
	panic("not a KV op")
}

// revNear maps a small number to a revision near the current one (0 stays
// 0: "the key does not exist").
func (e *env) revNear(v int64) int64 {
	if v == 0 {
		return 0
	}
	return max(e.base, e.cur-v+1)
}

func (e *env) opResp(r *pb.ResponseOp) string {
	switch x := r.Response.(type) {
	case *pb.ResponseOp_ResponseRange:
		return e.rangeResp(x.ResponseRange)
	case *pb.ResponseOp_ResponsePut:
		return e.putResp(x.ResponsePut)
	case *pb.ResponseOp_ResponseDeleteRange:
		return e.delResp(x.ResponseDeleteRange)
	case *pb.ResponseOp_ResponseTxn:
		return e.txnResp(x.ResponseTxn)
	}
	return "?"
}

func (e *env) rangeResp(r *pb.RangeResponse) string {
	return fmt.Sprintf("get %s count=%d more=%v kvs=%s", e.seen(r.Header), r.Count, r.More, e.kvs(r.Kvs))
}

func (e *env) putResp(r *pb.PutResponse) string {
	return fmt.Sprintf("put %s prev=%s", e.seen(r.Header), e.kv(r.PrevKv))
}

func (e *env) delResp(r *pb.DeleteRangeResponse) string {
	return fmt.Sprintf("del %s deleted=%d prev=%s", e.seen(r.Header), r.Deleted, e.kvs(r.PrevKvs))
}

func (e *env) txnResp(r *pb.TxnResponse) string {
	parts := make([]string, len(r.Responses))
	for i, x := range r.Responses {
		parts[i] = e.opResp(x)
	}
	return fmt.Sprintf("txn %s ok=%v (%s)", e.seen(r.Header), r.Succeeded, strings.Join(parts, "; "))
}

func (e *env) exec(o op) string {
	ctx, api := e.ctx, e.api
	switch o.kind {
	case opPut, opGet, opDelete, opTxn:
		resp, err := api.Do(ctx, e.kvOp(o))
		if err != nil {
			return errKind(err)
		}
		switch {
		case resp.Put() != nil:
			return e.putResp((*pb.PutResponse)(resp.Put()))
		case resp.Get() != nil:
			return e.rangeResp((*pb.RangeResponse)(resp.Get()))
		case resp.Del() != nil:
			return e.delResp((*pb.DeleteRangeResponse)(resp.Del()))
		default:
			return e.txnResp((*pb.TxnResponse)(resp.Txn()))
		}
	case opGetStream:
		k, opts := e.selOpts(o.key)
		if rev := e.revOf(o.rev); rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		if o.limit > 0 {
			opts = append(opts, clientv3.WithLimit(o.limit))
		}
		if o.flags&2 != 0 {
			opts = append(opts, clientv3.WithCountOnly())
		}
		ch, err := api.GetStream(ctx, k, opts...)
		if err != nil {
			return "stream " + errKind(err)
		}
		resp, err := clientv3.GetStreamToGetResponse(ch)
		if err != nil {
			return "stream " + errKind(err)
		}
		return "stream " + e.rangeResp((*pb.RangeResponse)(resp))
	case opTooManyOps:
		ops := make([]clientv3.Op, 129)
		for i := range ops {
			ops[i] = clientv3.OpGet(e.key(genKeyN(i)))
		}
		_, err := api.Txn(ctx).Then(ops...).Commit()
		return "too many: " + errKind(err)
	case opGrant, opGrantSmall:
		resp, err := api.Grant(ctx, o.ttl)
		if err != nil {
			return "grant " + errKind(err)
		}
		e.leases = append(e.leases, resp.ID)
		name := "L" + strconv.Itoa(len(e.leases)-1)
		e.names[int64(resp.ID)] = name
		out := fmt.Sprintf("grant %s %s ttl=%d", e.seen(resp.ResponseHeader), name, resp.TTL)
		if o.kind == opGrantSmall {
			rr, err := api.Revoke(ctx, resp.ID)
			if err != nil {
				return out + " revoke " + errKind(err)
			}
			out += " revoked " + e.seen(rr.Header)
		}
		return out
	case opKeepAlive:
		resp, err := api.KeepAliveOnce(ctx, e.leaseID(o.lease))
		if err != nil {
			return "keepalive " + errKind(err)
		}
		return fmt.Sprintf("keepalive %s %s ttl=%d", e.seen(resp.ResponseHeader), e.leaseName(int64(resp.ID)), resp.TTL)
	case opRevoke:
		resp, err := api.Revoke(ctx, e.leaseID(o.lease))
		if err != nil {
			return "revoke " + errKind(err)
		}
		return "revoke " + e.seen(resp.Header)
	case opTTL:
		var opts []clientv3.LeaseOption
		if o.flags&1 != 0 {
			opts = append(opts, clientv3.WithAttachedKeys())
		}
		resp, err := api.TimeToLive(ctx, e.leaseID(o.lease), opts...)
		if err != nil {
			return "ttl " + errKind(err)
		}
		ttl := strconv.FormatInt(resp.TTL, 10)
		if resp.TTL >= resp.GrantedTTL-3 && resp.TTL <= resp.GrantedTTL && resp.TTL > 0 {
			ttl = "about granted"
		}
		keys := make([]string, len(resp.Keys))
		for i, k := range resp.Keys {
			keys[i] = strings.TrimPrefix(string(k), e.prefix)
		}
		slices.Sort(keys)
		return fmt.Sprintf("ttl %s %s ttl=%s granted=%d keys=%v", e.seen(resp.ResponseHeader), e.leaseName(int64(resp.ID)), ttl, resp.GrantedTTL, keys)
	case opLeases:
		resp, err := api.Leases(ctx)
		if err != nil {
			return "leases " + errKind(err)
		}
		var names []string
		for _, l := range resp.Leases {
			if n, ok := e.names[int64(l.ID)]; ok {
				names = append(names, n)
			}
		}
		slices.Sort(names)
		return fmt.Sprintf("leases %s %v", e.seen(resp.ResponseHeader), names)
	case opCompact:
		for _, w := range e.unsynced {
			e.sync(w)
		}
		e.unsynced = nil
		rev := e.revOf(o.rev)
		if rev == 0 {
			rev = e.cur
		}
		resp, err := api.Compact(ctx, rev)
		if err != nil {
			return "compact " + e.rel(rev) + " " + errKind(err)
		}
		e.compact = rev
		return "compact " + e.rel(rev) + " " + e.seen(resp.Header)
	case opWatch:
		name := fmt.Sprintf("w%d", len(e.watches))
		k, opts := e.selOpts(o.key)
		rev := e.revOf(o.rev)
		if o.rev < 0 {
			rev = e.cur + 1 // the next revision; later ones would never catch up
		}
		if o.flags&64 != 0 && e.compact > 0 {
			rev = max(e.base, e.compact-int64(o.flags&1)) // at, or just below, the compaction
		}
		if rev != 0 {
			opts = append(opts, clientv3.WithRev(rev))
		}
		if o.flags&2 != 0 {
			opts = append(opts, clientv3.WithPrevKV())
		}
		if o.flags&4 != 0 && o.flags&8 == 0 {
			opts = append(opts, clientv3.WithFilterPut())
		}
		if o.flags&8 != 0 && o.flags&4 == 0 {
			opts = append(opts, clientv3.WithFilterDelete())
		}
		wctx, cancel := context.WithCancel(metadata.AppendToOutgoingContext(ctx, "watch", name))
		w := &watchRun{name: name, start: rev, ctx: wctx, cancel: cancel}
		w.ch = api.Watch(wctx, k, opts...)
		e.watches = append(e.watches, w)
		if rev != 0 && rev <= e.cur {
			e.unsynced = append(e.unsynced, w)
		}
		return fmt.Sprintf("watch %s from %s", name, e.rel(rev))
	}
	return "?"
}

func genKeyN(i int) string { return testKeys[i%len(testKeys)] }

// drain reads w until a progress notification at or after rev, or its end.
func (e *env) drain(w *watchRun, rev int64) []string {
	var out []string
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	timeout := time.NewTimer(10 * time.Second)
	defer timeout.Stop()
	_ = e.api.RequestProgress(w.ctx)
	lastRev := int64(0)
	for {
		var wr clientv3.WatchResponse
		ok := true
		var tc <-chan time.Time
		var wch clientv3.WatchChan
		switch {
		case len(w.buf) > 0:
			wr, w.buf = w.buf[0], w.buf[1:]
		case w.closed:
			ok = false
		default:
			tc, wch = tick.C, w.ch
		}
		if wch != nil {
			select {
			case wr, ok = <-wch:
			case <-tc:
				_ = e.api.RequestProgress(w.ctx)
				continue
			case <-timeout.C:
				return append(out, w.name+" timed out")
			}
		}
		{
			if !ok {
				return append(out, w.name+" closed")
			}
			if wr.IsProgressNotify() {
				if wr.Header.Revision >= rev {
					return append(out, w.name+" caught up")
				}
				continue
			}
			if wr.CompactRevision != 0 {
				// etcd reports the compaction in force when it syncs the
				// watcher, which may be a later one than at creation.
				out = append(out, fmt.Sprintf("%s compacted after its start %v canceled=%v", w.name, wr.CompactRevision > w.start, wr.Canceled))
			}
			if wr.Err() != nil {
				out = append(out, fmt.Sprintf("%s err %s", w.name, errKind(wr.Err())))
			}
			for i, ev := range wr.Events {
				if i == 0 && ev.Kv.ModRevision == lastRev {
					out = append(out, w.name+" revision split across responses")
				}
				lastRev = ev.Kv.ModRevision
				prev := ""
				if ev.PrevKv != nil {
					prev = " prev=" + e.kv(ev.PrevKv)
				}
				out = append(out, fmt.Sprintf("%s %s %s%s", w.name, ev.Type, e.kv(ev.Kv), prev))
			}
		}
	}
}

// TestConformanceLeaseExpiry lets a lease expire, by waiting on real etcd
// and by advancing the fake clock on memetcd, and requires the same
// outcome: the lease's keys deleted in one revision, in key order, and the
// lease gone for every lease call.
func TestConformanceLeaseExpiry(t *testing.T) {
	c := cluster.New(t, 1)
	real := c.NewClient(t)
	want := expiryScenario(t, real, func(ctx context.Context, wch clientv3.WatchChan) clientv3.WatchResponse {
		select {
		case wr := <-wch: // etcd checks expiry every 500ms
			return wr
		case <-time.After(10 * time.Second):
			t.Fatal("the lease did not expire on etcd")
		}
		return clientv3.WatchResponse{}
	})

	fc := clockwork.NewFakeClock()
	srv, err := memetcd.New(memetcd.Config{Clock: fc, MinLeaseTTL: time.Second})
	require.NoError(t, err)
	defer srv.Close()
	mc := srv.NewClient()
	got := expiryScenario(t, mc, func(ctx context.Context, wch clientv3.WatchChan) clientv3.WatchResponse {
		fc.Advance(time.Second)
		return <-wch
	})
	require.Equal(t, want, got)
	joined := strings.Join(got, "\n")
	require.Contains(t, joined, `DELETE {a="" c=0 m=r3`, "both keys of the lease deleted in one revision, in key order")
	require.Contains(t, joined, `DELETE {b="" c=0 m=r3`)
}

func expiryScenario(t *testing.T, api etcdAPI, expire func(context.Context, clientv3.WatchChan) clientv3.WatchResponse) []string {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	e := &env{t: t, api: api, ctx: ctx, prefix: "/expiry/", names: make(map[int64]string)}
	g, err := api.Grant(ctx, 0)
	require.NoError(t, err)
	e.names[int64(g.ID)] = "L0"
	var out []string
	out = append(out, fmt.Sprintf("granted ttl=%d", g.TTL))
	first, err := api.Put(ctx, e.key("b"), "1", clientv3.WithLease(g.ID))
	require.NoError(t, err)
	e.base = first.Header.Revision
	_, err = api.Put(ctx, e.key("a"), "2", clientv3.WithLease(g.ID))
	require.NoError(t, err)
	_, err = api.Put(ctx, e.key("c"), "3")
	require.NoError(t, err)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	wch := api.Watch(wctx, e.prefix, clientv3.WithPrefix(), clientv3.WithRev(e.base), clientv3.WithPrevKV())
	for puts := 0; puts < 3; { // the catch-up may come in one response
		wr := <-wch
		for _, ev := range wr.Events {
			out = append(out, fmt.Sprintf("%s %s", ev.Type, e.kv(ev.Kv)))
			puts++
		}
	}
	wr := expire(ctx, wch)
	for _, ev := range wr.Events {
		out = append(out, fmt.Sprintf("%s %s prev=%s", ev.Type, e.kv(ev.Kv), e.kv(ev.PrevKv)))
	}
	ttl, err := api.TimeToLive(ctx, g.ID)
	require.NoError(t, err)
	out = append(out, fmt.Sprintf("ttl=%d", ttl.TTL))
	_, err = api.KeepAliveOnce(ctx, g.ID)
	out = append(out, "keepalive "+errKind(err))
	_, err = api.Revoke(ctx, g.ID)
	out = append(out, "revoke "+errKind(err))
	_, err = api.Put(ctx, e.key("d"), "4", clientv3.WithLease(g.ID))
	out = append(out, "put "+errKind(err))
	resp, err := api.Get(ctx, e.prefix, clientv3.WithPrefix())
	require.NoError(t, err)
	out = append(out, e.rangeResp((*pb.RangeResponse)(resp)))
	return out
}
