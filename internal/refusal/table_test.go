package refusal_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/internal/refusal"
	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/router/grpcroute/tenurepb"
)

func TestMain(m *testing.M) { testsupport.VerifyTestMain(m) }

// The table is consistent: one row per kind, the wire values of this
// version (which never change), a gRPC form exactly where a kind has a
// gRPC code, every proto kind of tenure.v1.Refusal with its row.
func TestTable(t *testing.T) {
	rows := refusal.Rows()
	words := map[refusal.Kind]bool{}
	protos := map[tenurepb.Refusal_Kind]bool{}
	for _, r := range rows {
		require.False(t, words[r.Kind], "kind %q twice", r.Kind)
		words[r.Kind] = true
		got, ok := refusal.Lookup(r.Kind)
		require.True(t, ok)
		require.Equal(t, r.Kind, got.Kind)
		assert.NotZero(t, r.Status, r.Kind)
		assert.Equal(t, r.Code == codes.OK, r.Proto == tenurepb.Refusal_KIND_UNSPECIFIED, "%s: a gRPC code iff a proto kind", r.Kind)
		if r.Proto != tenurepb.Refusal_KIND_UNSPECIFIED {
			require.False(t, protos[r.Proto], "proto kind %s twice", r.Proto)
			protos[r.Proto] = true
			byProto, ok := refusal.ByProto(r.Proto)
			require.True(t, ok)
			assert.Equal(t, r.Kind, byProto.Kind)
		}
		assert.Equal(t, r.Token, r.Kind == refusal.Stale, "%s: only a stale refusal describes its token", r.Kind)
		if r.Err != nil {
			assert.Equal(t, r.Kind, refusal.KindOf(fmt.Errorf("wrapped: %w", r.Err)))
		}
	}
	for v := range tenurepb.Refusal_Kind_name {
		p := tenurepb.Refusal_Kind(v)
		_, ok := refusal.ByProto(p)
		assert.Equal(t, p != tenurepb.Refusal_KIND_UNSPECIFIED, ok, "proto kind %s", p)
	}
	_, ok := refusal.Lookup("from-the-future")
	assert.False(t, ok)
	_, ok = refusal.ByProto(99)
	assert.False(t, ok)

	// The wire values of this version: the HTTP words and statuses, the
	// gRPC codes and proto enum numbers. Changing one breaks peers.
	for _, w := range []struct {
		kind   refusal.Kind
		status int
		code   codes.Code
		proto  int32
		retry  bool
	}{
		{"stale", http.StatusConflict, codes.Aborted, 4, true},
		{"not-owner", http.StatusMisdirectedRequest, codes.Unavailable, 1, true},
		{"handoff", http.StatusServiceUnavailable, codes.Unavailable, 2, true},
		{"session-lost", http.StatusServiceUnavailable, codes.Unavailable, 3, true},
		{"unavailable", http.StatusServiceUnavailable, codes.Unavailable, 5, true},
		{"invalid-token", http.StatusBadRequest, codes.OK, 0, false},
		{"no-token", http.StatusPreconditionRequired, codes.OK, 0, false},
		{"unverified", http.StatusForbidden, codes.OK, 0, false},
	} {
		r, ok := refusal.Lookup(w.kind)
		require.True(t, ok, w.kind)
		assert.Equal(t, w.status, r.Status, w.kind)
		assert.Equal(t, w.code, r.Code, w.kind)
		assert.Equal(t, w.proto, int32(r.Proto), w.kind)
		assert.Equal(t, w.retry, r.Retryable, w.kind)
	}
	assert.Len(t, rows, 8)
}

func TestKindOf(t *testing.T) {
	for err, want := range map[error]refusal.Kind{
		nil:                     "",
		errors.New("disk full"): "",
		&fence.StaleError{Scope: "p/1", Presented: 2, Current: 3}: refusal.Stale,
		fence.ErrInvalidToken:                 refusal.InvalidToken,
		fmt.Errorf("x: %w", fence.ErrNoToken): refusal.NoToken,
		fence.ErrBadSignature:                 refusal.Unverified,
		fence.ErrUnknownEpoch:                 refusal.Unverified,
	} {
		assert.Equal(t, want, refusal.KindOf(err), "%v", err)
	}
}

// A refusal never names the node that refused, unless that node is
// finishing acquiring the partition in a handoff; kinds about tokens
// carry no route; messages are worded by their cause.
func TestNew(t *testing.T) {
	b := &refusal.Hint{Partition: 3, Owner: "b", Addr: "h:1", Epoch: 7, RingVersion: 2}
	self := &refusal.Hint{Partition: 3, Owner: "a", Addr: "h:0", Epoch: 8, RingVersion: 2}
	acquiring := &refusal.Hint{Partition: 3, Owner: "a", Addr: "h:0", RingVersion: 2, Acquiring: true}
	for _, tt := range []struct {
		kind  refusal.Kind
		route *refusal.Hint
		cause string
		hint  *refusal.Hint
		msg   string
	}{
		{refusal.NotOwner, b, "", b, `p: not the owner of partition 3: owner "b" at h:1 epoch 7`},
		{refusal.Handoff, b, "", b, `p: partition 3 is changing owner: next owner "b" at h:1 epoch 7`},
		{refusal.Handoff, acquiring, "", acquiring, `p: partition 3 is changing owner: this node "a" at h:0 is acquiring it`},
		{refusal.Handoff, self, "", &refusal.Hint{Partition: 3, RingVersion: 2}, `p: unavailable: no node serves partition 3 yet (handoff)`},
		{refusal.NotOwner, acquiring, "", &refusal.Hint{Partition: 3, RingVersion: 2}, `p: unavailable: no node serves partition 3 yet (not-owner)`},
		{refusal.SessionLost, b, "", b, `p: session-lost: partition 3, next owner "b" at h:1 epoch 7`},
		{refusal.SessionLost, nil, "closed", nil, `p: closed`},
		{refusal.Stale, self, "", &refusal.Hint{Partition: 3, RingVersion: 2}, `p: refused: stale (partition 3)`},
		{refusal.Unavailable, b, "etcd: no leader", b, `p: etcd: no leader`},
		{refusal.Unverified, b, "", nil, `p: refused: unverified`},
	} {
		r := refusal.New("p", tt.kind, "a", tt.route, tt.cause)
		assert.Equal(t, tt.kind, r.Kind)
		assert.Equal(t, tt.hint, r.Hint, "%s %+v", tt.kind, tt.route)
		assert.Equal(t, tt.msg, r.Message)
	}
	r := refusal.New("p", refusal.Stale, "a", nil, "stale")
	r.SetToken(fmt.Errorf("put: %w", &fence.StaleError{Scope: "p/3", Presented: 7, Current: 9}))
	assert.Equal(t, refusal.Refusal{Kind: refusal.Stale, Message: "p: stale", Scope: "p/3", Presented: 7, Current: 9}, r)
	r = refusal.New("p", refusal.Handoff, "a", nil, "moved")
	r.SetToken(&fence.StaleError{Scope: "p/3", Presented: 7, Current: 9})
	assert.Empty(t, r.Scope, "only a stale refusal describes its token")
}

// What a client takes from a hint follows the table: an answer always, advice
// only when it names an owner, nothing from a kind without a route, and
// an error for a hint that is not a route. Both wires decode alike.
func TestTake(t *testing.T) {
	named := refusal.Hint{Partition: 3, Owner: "b", Addr: "h:1", Epoch: 7, RingVersion: 2, Acquiring: true}
	bare := refusal.Hint{Partition: 3}
	for _, tt := range []struct {
		kind refusal.Kind
		h    refusal.Hint
		want *refusal.Hint
	}{
		{refusal.NotOwner, named, &named},
		{refusal.SessionLost, bare, &bare},
		{refusal.Handoff, refusal.Hint{}, &refusal.Hint{}},
		{refusal.Stale, named, &named},
		{refusal.Stale, bare, nil},
		{refusal.Unavailable, bare, nil},
		{refusal.Unverified, named, nil},
		{"from-the-future", named, nil},
	} {
		raw, err := json.Marshal(tt.h)
		require.NoError(t, err)
		got, err := refusal.DecodeJSON(tt.kind, raw)
		require.NoError(t, err)
		assert.Equal(t, tt.want, got, "HTTP %s %+v", tt.kind, tt.h)

		row, _ := refusal.Lookup(tt.kind)
		if row.Proto == tenurepb.Refusal_KIND_UNSPECIFIED {
			continue
		}
		p := refusal.Refusal{Kind: tt.kind, Hint: &tt.h}.Proto()
		got2, got, err := refusal.FromProto(p)
		require.NoError(t, err)
		assert.Equal(t, row, got2)
		assert.Equal(t, tt.want, got, "gRPC %s %+v", tt.kind, tt.h)
	}
	got, err := refusal.DecodeJSON(refusal.NotOwner, nil)
	require.NoError(t, err)
	assert.Equal(t, &refusal.Hint{}, got, "an answer without a hint is one of partition 0")

	for _, raw := range []string{`{"partition":-3}`, `{"partition":1,"owner":"b","epoch":-1}`, `{"partition":"1"}`, `[1]`} {
		_, err := refusal.DecodeJSON(refusal.Stale, []byte(raw))
		assert.Error(t, err, raw)
	}
	_, err = refusal.DecodeJSON(refusal.Unverified, []byte(`{"partition":-3}`))
	assert.NoError(t, err, "the hint of a kind without a route is not read")
	_, _, err = refusal.FromProto(&tenurepb.Refusal{Kind: tenurepb.Refusal_NOT_OWNER, Partition: 1 << 31})
	assert.Error(t, err)
	_, _, err = refusal.FromProto(&tenurepb.Refusal{Kind: tenurepb.Refusal_NOT_OWNER, Epoch: -1})
	assert.Error(t, err)
	row, h, err := refusal.FromProto(&tenurepb.Refusal{Kind: 99, Retryable: true, Owner: "b", Addr: "h:1"})
	require.NoError(t, err)
	assert.False(t, row.Retryable, "a kind this version does not know is not retried, whatever its field says")
	assert.Nil(t, h)
	row, _, _ = refusal.FromProto(nil)
	assert.Equal(t, refusal.Row{}, row)
}

// ParseJSON takes any bytes from the network without panicking, and
// what it accepts is a route that encodes back to the same hint.
func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{``, `{}`, `{"partition":3,"owner":"b","addr":"h:1","epoch":7,"ring_version":2,"acquiring":true}`,
		`{"partition":-1}`, `{"epoch":"x"}`, `null`, `[`, `{"partition":1e30}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		h, err := refusal.ParseJSON(raw)
		if err != nil || h == nil {
			return
		}
		if h.Partition < 0 || h.Epoch < 0 {
			t.Fatalf("accepted %+v", h)
		}
		again, err := refusal.ParseJSON(refusal.Refusal{Hint: h}.JSON())
		if err != nil || *again != *h {
			t.Fatalf("%+v does not round-trip: %+v, %v", h, again, err)
		}
	})
}
