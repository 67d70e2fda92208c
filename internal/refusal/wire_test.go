package refusal_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/status"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/httpfence"
	"github.com/tenure-go/tenure/internal/refusal"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/router/grpcroute"
	"github.com/tenure-go/tenure/router/grpcroute/tenurepb"
	"github.com/tenure-go/tenure/sim/fleettest"
)

// want is what a scenario expects of its refusal beyond its kind's row:
// the refusing server, which no hint names unless it is acquiring, the
// hint that the client takes (nil: none; compared without its ring
// version), and the stale token's details.
type want struct {
	by                 string
	hint               *refusal.Hint
	scope              string
	presented, current int64
}

// A scenario makes a real server refuse a request or call with one kind,
// sends it with a real client, and returns what to expect.
type (
	httpScenario func(t *testing.T, w *world) (want, httpAnswer)
	grpcScenario func(t *testing.T, w *world) (want, error)
)

// httpScenarios make each kind of refusal on the HTTP wire: every kind
// has at least one.
var httpScenarios = map[refusal.Kind][]httpScenario{
	refusal.Stale: {func(t *testing.T, w *world) (want, httpAnswer) {
		a, key := w.http.a, w.ownedKey(t, w.http.a, "stale")
		return staleWant(a, key), w.httpCall(t, "/stale/"+key, key, a.addr, false, nil)
	}},
	refusal.NotOwner: {func(t *testing.T, w *world) (want, httpAnswer) {
		// A forwarded request that lands on a node that does not own it.
		a, key := w.http.a, w.ownedKey(t, w.http.a, "misdirected")
		return want{by: "b", hint: routeOf(a, key)}, w.httpCall(t, "/ok/"+key, key, w.http.b.addr, true, nil)
	}},
	refusal.Handoff: {func(t *testing.T, w *world) (want, httpAnswer) {
		h := w.http.acquiring
		return acquiringWant(h), w.httpCall(t, "/ok/k", w.routable(t, "k"), h.addr, false, nil)
	}},
	refusal.SessionLost: {func(t *testing.T, w *world) (want, httpAnswer) {
		c := w.http.closing
		require.NoError(t, c.node.Close(context.Background()))
		return want{by: "c", hint: &refusal.Hint{}}, w.httpCall(t, "/ok/k", w.routable(t, "k"), c.addr, false, nil)
	}},
	refusal.Unavailable: {
		func(t *testing.T, w *world) (want, httpAnswer) { // etcd without a leader under the handler
			a, key := w.http.a, w.ownedKey(t, w.http.a, "unavailable")
			return want{by: "a"}, w.httpCall(t, "/unavailable/"+key, key, a.addr, false, nil)
		},
		func(t *testing.T, w *world) (want, httpAnswer) { // a router.Handler without a key function
			a, key := w.http.a, w.ownedKey(t, w.http.a, "unavailable")
			return want{by: "a"}, w.httpCall(t, "/nokey/"+key, key, a.addr, false, nil)
		},
	},
	refusal.InvalidToken: {func(t *testing.T, w *world) (want, httpAnswer) {
		return want{by: "svc"}, w.httpCall(t, "/ok/k", w.routable(t, "k"), w.svc, false, http.Header{httpfence.Header: {"p/1@x"}})
	}},
	refusal.NoToken: {func(t *testing.T, w *world) (want, httpAnswer) {
		return want{by: "svc"}, w.httpCall(t, "/ok/k", w.routable(t, "k"), w.svc, false, nil)
	}},
	refusal.Unverified: {func(t *testing.T, w *world) (want, httpAnswer) {
		// A well-formed token without the fleet's signature.
		return want{by: "svc"}, w.httpCall(t, "/ok/k", w.routable(t, "k"), w.svc, false, http.Header{httpfence.Header: {"p/1@5"}})
	}},
}

// grpcScenarios make each kind of refusal that has a gRPC form on the
// gRPC wire.
var grpcScenarios = map[refusal.Kind]grpcScenario{
	refusal.Stale: func(t *testing.T, w *world) (want, error) {
		a, key := w.grpc.a, w.ownedKey(t, w.grpc.a, "stale")
		return staleWant(a, key), w.grpcCall(t, a.addr, key, "stale")
	},
	refusal.NotOwner: func(t *testing.T, w *world) (want, error) {
		a, key := w.grpc.a, w.ownedKey(t, w.grpc.a, "misdirected")
		return want{by: "b", hint: routeOf(a, key)}, w.grpcCall(t, w.grpc.b.addr, key, "")
	},
	refusal.Handoff: func(t *testing.T, w *world) (want, error) {
		h := w.grpc.acquiring
		return acquiringWant(h), w.grpcCall(t, h.addr, "k", "")
	},
	refusal.SessionLost: func(t *testing.T, w *world) (want, error) {
		c := w.grpc.closing
		require.NoError(t, c.node.Close(context.Background()))
		return want{by: "c", hint: &refusal.Hint{}}, w.grpcCall(t, c.addr, "k", "")
	},
	refusal.Unavailable: func(t *testing.T, w *world) (want, error) {
		a, key := w.grpc.a, w.ownedKey(t, w.grpc.a, "unavailable")
		return want{by: "a"}, w.grpcCall(t, a.addr, key, "unavailable")
	},
}

// TestEveryKindOnBothWires walks every row of the refusal table over
// both wires, end to end: real nodes on a real etcd, their real HTTP
// (router.Handler, router.WriteError, and a fenced service's
// httpfence.Handler) and gRPC (grpcroute.Server) servers on loopback, and
// the real clients, router.Client and grpcroute.Client, reading the
// answers. Each answer must be what the row says: the HTTP status (and
// Retry-After) or the gRPC code and proto kind, retryable or not (and the
// client retries it or not), the hint the client takes, and the stale
// token. A kind without a gRPC form is one a gRPC handler's error is
// returned as it is. A row without a scenario fails the test.
func TestEveryKindOnBothWires(t *testing.T) {
	w := newWorld(t)
	for _, row := range refusal.Rows() {
		t.Run(string(row.Kind), func(t *testing.T) {
			require.NotEmpty(t, httpScenarios[row.Kind], "no HTTP scenario for kind %q", row.Kind)
			for _, scenario := range httpScenarios[row.Kind] {
				want, got := scenario(t, w)
				checkHTTP(t, row, got, want)
			}
			scenario, ok := grpcScenarios[row.Kind]
			if row.Proto == tenurepb.Refusal_KIND_UNSPECIFIED {
				require.False(t, ok, "kind %q has no gRPC form, but a gRPC scenario", row.Kind)
				checkNoGRPC(t, w, row)
				return
			}
			require.True(t, ok, "no gRPC scenario for kind %q", row.Kind)
			want, err := scenario(t, w)
			checkGRPC(t, row, err, want)
		})
	}
}

// httpAnswer is what router.Client made of an answer.
type httpAnswer struct {
	status  int
	header  http.Header
	ref     *httpfence.Refusal
	retried bool                       // the client would send the request again
	hint    *ownership.WrongOwnerError // what the client took from the refusal's hint
}

// httpCall sends GET path for key with router.Client, aimed at addr (as
// forwarded if forwarded says so) with header, and returns what the
// client made of the answer.
func (w *world) httpCall(t *testing.T, path, key, addr string, forwarded bool, header http.Header) httpAnswer {
	t.Helper()
	to := &aim{addr: addr, forwarded: forwarded}
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), aimKey{}, to), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://tenure"+path, nil)
	require.NoError(t, err)
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := w.hc.Do(ctx, key, req)
	got := httpAnswer{}
	if err != nil {
		require.ErrorIs(t, err, router.ErrRetriesExhausted)
		got.retried = true
		require.True(t, errors.As(err, &got.ref), "%v", err)
		errors.As(err, &got.hint)
	} else {
		defer resp.Body.Close()
		got.ref, err = httpfence.ReadRefusal(resp)
		require.NoError(t, err)
		_, _ = io.Copy(io.Discard, resp.Body)
	}
	require.NotNil(t, got.ref, "answered %d: not a refusal", to.status)
	got.status, got.header = to.status, to.header
	return got
}

// grpcCall calls Check of service for key with the gRPC client's
// interceptor, at addr, and returns its error.
func (w *world) grpcCall(t *testing.T, addr, key, service string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := healthpb.NewHealthClient(w.grpcConn(t, addr)).Check(grpcroute.WithKey(ctx, key),
		&healthpb.HealthCheckRequest{Service: service})
	require.Error(t, err)
	return err
}

func checkHTTP(t *testing.T, row refusal.Row, got httpAnswer, want want) {
	t.Helper()
	ref := got.ref
	assert.Equal(t, row.Status, got.status, "status: %s", ref.Message)
	assert.Equal(t, string(row.Kind), got.header.Get(httpfence.RefusalHeader))
	assert.Equal(t, row.Status == http.StatusServiceUnavailable, got.header.Get("Retry-After") != "", "Retry-After")
	require.Equal(t, httpfence.RefusalKind(row.Kind), ref.Kind, ref.Message)
	assert.Equal(t, row.Retryable, ref.Retryable())
	assert.Equal(t, row.Retryable, got.retried, "the client retries iff the table says so")
	if row.Err != nil {
		assert.ErrorIs(t, ref, row.Err)
	}
	told, err := refusal.ParseJSON(ref.Hint)
	require.NoError(t, err)
	if row.Route == refusal.NoRoute {
		assert.Nil(t, told, "a %s refusal carries no hint", row.Kind)
	}
	checkTold(t, row, told, want)
	var taken *refusal.Hint
	if got.hint != nil {
		taken = &refusal.Hint{Partition: got.hint.Partition, Owner: got.hint.Owner, Addr: got.hint.Addr,
			Epoch: got.hint.Epoch, Acquiring: got.hint.Acquiring}
		assert.Equal(t, row.Kind == refusal.SessionLost, got.hint.SessionLost)
	}
	if row.Retryable { // a refusal the client does not retry gives it no hint
		assert.Equal(t, want.hint, taken, "the hint the client took")
	}
	checkToken(t, row, want, ref.Scope, ref.Presented, ref.Current)
}

func checkGRPC(t *testing.T, row refusal.Row, err error, want want) {
	t.Helper()
	assert.Equal(t, row.Code, status.Code(err), "%v", err)
	assert.Equal(t, row.Retryable, errors.Is(err, grpcroute.ErrRetriesExhausted), "the client retries iff the table says so: %v", err)
	ref := grpcroute.RefusalOf(err)
	require.NotNil(t, ref, "%v", err)
	assert.Equal(t, row.Proto, ref.Kind)
	assert.Equal(t, row.Retryable, ref.Retryable)
	told := &refusal.Hint{Partition: int(ref.Partition), Owner: ref.Owner, Addr: ref.Addr, Epoch: ref.Epoch, Acquiring: ref.Acquiring}
	checkTold(t, row, told, want)
	gotRow, taken, err := refusal.FromProto(ref)
	require.NoError(t, err)
	assert.Equal(t, row, gotRow)
	if taken != nil {
		taken.RingVersion = 0
	}
	assert.Equal(t, want.hint, taken, "the hint the client takes")
	checkToken(t, row, want, ref.Scope, ref.Presented, ref.Current)
}

// checkNoGRPC checks a kind that has no gRPC form: a gRPC handler's error
// of that kind reaches the caller as it is, neither a refusal nor retried.
func checkNoGRPC(t *testing.T, w *world, row refusal.Row) {
	t.Helper()
	assert.Equal(t, codes.OK, row.Code)
	a, key := w.grpc.a, w.ownedKey(t, w.grpc.a, "token")
	err := w.grpcCall(t, a.addr, key, string(row.Kind))
	assert.Equal(t, codes.Unknown, status.Code(err), "%v", err)
	assert.Contains(t, status.Convert(err).Message(), row.Err.Error())
	assert.Nil(t, grpcroute.RefusalOf(err))
	assert.NotErrorIs(t, err, grpcroute.ErrRetriesExhausted)
}

// checkTold checks the hint a refusal told: never the refusing node,
// unless it is acquiring the partition in a handoff.
func checkTold(t *testing.T, row refusal.Row, told *refusal.Hint, want want) {
	t.Helper()
	if told == nil {
		return
	}
	if told.Owner == want.by {
		assert.True(t, row.Kind == refusal.Handoff && told.Acquiring, "a %s refusal by %s names it: %+v", row.Kind, want.by, told)
	}
	assert.Equal(t, told.Acquiring && told.Owner == want.by, told.Acquiring, "acquiring names the refusing node")
}

func checkToken(t *testing.T, row refusal.Row, want want, scope string, presented, current int64) {
	t.Helper()
	if !row.Token {
		assert.Empty(t, scope)
		return
	}
	assert.Equal(t, want.scope, scope)
	assert.Equal(t, want.presented, presented)
	assert.Equal(t, want.current, current)
}

// staleWant is what the stale refusal of key's write on owner tells: its
// token, and no hint the client follows (the route names the owner
// itself).
func staleWant(owner *server, key string) want {
	r := owner.node.Lookup(key)
	return want{by: owner.id, scope: fence.PartitionScope(r.Partition), presented: r.Epoch, current: r.Epoch + 1}
}

// routeOf is the hint of key's route as s sees it.
func routeOf(s *server, key string) *refusal.Hint {
	r := s.node.Lookup(key)
	return &refusal.Hint{Partition: r.Partition, Owner: r.Owner, Addr: r.Addr, Epoch: r.Epoch}
}

// acquiringWant is what the refusal by a node acquiring its one partition
// tells: the node itself, acquiring, with no claim epoch yet (come back
// shortly).
func acquiringWant(h *server) want {
	return want{by: h.id, hint: &refusal.Hint{Owner: h.id, Addr: h.addr, Acquiring: true}}
}

// ownedKey returns a key that s owns, once the HTTP client routes it
// there (for the HTTP wire).
func (w *world) ownedKey(t *testing.T, s *server, prefix string) string {
	t.Helper()
	key := fleettest.KeyOwnedBy(t, s.node, prefix)
	if s == w.http.a || s == w.http.b {
		fleettest.WaitRoute(t, w.hc, key, s.addr)
	}
	return key
}

// routable returns key once the HTTP client routes it to some node: it
// then sends a request for it (where aim says).
func (w *world) routable(t *testing.T, key string) string {
	t.Helper()
	fleettest.WaitUntil(t, 10*time.Second, "no route for "+key, func() (string, <-chan struct{}) {
		ch := w.hc.Changed()
		if w.hc.Lookup(key).Addr == "" {
			return "no address", ch
		}
		return "", nil
	})
	return key
}
