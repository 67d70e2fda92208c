package httpfence_test

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/fence/httpfence"
	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/ownership/fleet"
	"github.com/tenure-go/tenure/sim/cluster"
)

// newSigner returns a signer of key ID kid with a new key, and its public
// key.
func newSigner(t testing.TB, kid string) (*fence.Signer, ed25519.PublicKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	s, err := fence.NewSigner(kid, priv)
	require.NoError(t, err)
	return s, pub
}

// fleet is one real node of a fleet that signs its tokens and raises the
// floors of an etcdfence Store, and an Observer of the fleet from outside.
type testFleet struct {
	store    *etcdfence.Store
	node     *ownership.Node
	observer *fleet.Observer
	signer   *fence.Signer
	public   ed25519.PublicKey
}

func newFleet(t testing.TB, partitions int) *testFleet {
	t.Helper()
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	scfg := etcdfence.DefaultConfig()
	scfg.Prefix = "/svc/data/"
	scfg.Cluster = "verify"
	store, err := etcdfence.New(cli, scfg)
	require.NoError(t, err)
	signer, pub := newSigner(t, "k1")

	ncfg := ownership.DefaultConfig()
	ncfg.Cluster = "verify"
	ncfg.NodeID = "a"
	ncfg.Addr = "a.test:7000"
	ncfg.Ring.Partitions = partitions
	ncfg.Session.TTL = 2 * time.Second
	ncfg.Signer = signer
	ncfg.Fencers = []fence.Fencer{store}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	node, err := ownership.Join(ctx, cli, ncfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = node.Close(ctx)
	})
	obs, err := fleet.Observe(ctx, cli, fleet.ObserverConfig{Cluster: ncfg.Cluster, Ring: ncfg.Ring})
	require.NoError(t, err)
	t.Cleanup(obs.Close)
	return &testFleet{store: store, node: node, observer: obs, signer: signer, public: pub}
}

// hold waits, on the node's and the observer's signals, until the node
// serves p and the observer sees its claim, and returns the node's hold of
// p (released when the test ends).
func (f *testFleet) hold(t testing.TB, p int) ownership.Held {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		nch, och := f.node.Changed(), f.observer.Changed()
		if h, err := f.node.HoldPartition(p); err == nil {
			if f.observer.LookupPartition(p).Epoch == h.Token.Epoch {
				t.Cleanup(h.Release)
				return h
			}
			h.Release()
		}
		select {
		case <-nch:
		case <-och:
		case <-deadline:
			t.Fatalf("partition %d not served and observed", p)
		}
	}
}

// attempt sends PUT /key with the raw token and signature headers ("" for
// none) and returns the response's status and refusal (nil if none).
func attempt(t *testing.T, url, tok, sig string) (int, *httpfence.Refusal) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPut, url+"/forged", strings.NewReader("forged"))
	require.NoError(t, err)
	if tok != "" {
		req.Header.Set(httpfence.Header, tok)
	}
	if sig != "" {
		req.Header.Set(httpfence.SignatureHeader, sig)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	ref, err := httpfence.ReadRefusal(resp)
	require.NoError(t, err)
	return resp.StatusCode, ref
}

// syncBuffer is a bytes.Buffer safe for the Handler's concurrent logging.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestMadeUpTokensRefused: a fleet's node owns partition 5 and raised the
// store's floor to its epoch. Behind a Handler that verifies tokens
// against the fleet's claims (the Observer) or by the fleet's signature,
// a token made up by a plain HTTP client at the owner's epoch + 1, + 10^9
// and 2^63-1 is refused as unverified (403), the floor stays the owner's,
// and the owner's next request is admitted. An older epoch is refused as
// stale by the claims and as unsigned by the signature. To the signature
// verifier, a token signed by another key, by an unknown key ID, under
// another key ID, or with its epoch or scope changed after signing, and a
// malformed signature, are refused too. The verify_refusals_total metric
// counts each refusal by its reason, and the log never holds a signature.
func TestMadeUpTokensRefused(t *testing.T) {
	const p = 5
	f := newFleet(t, 8)
	held := f.hold(t, p)
	owner := held.Token
	ownerSig, ok := fence.SignatureFromContext(held.Context)
	require.True(t, ok, "the node signs its tenure's token")
	scope := owner.Scope

	other, _ := newSigner(t, "k1")   // an attacker's key under the fleet's key ID
	unknown, _ := newSigner(t, "k9") // a key ID the verifier does not hold
	_, k0 := newSigner(t, "k0")      // a second key the verifier holds
	sv, err := fence.NewSignatureVerifier(map[string]ed25519.PublicKey{"k1": f.public, "k0": k0})
	require.NoError(t, err)

	for name, v := range map[string]httpfence.Verifier{"claims": f.observer, "signature": sv} {
		t.Run(name, func(t *testing.T) {
			reg := prometheus.NewPedanticRegistry()
			var logs syncBuffer
			h, err := httpfence.New(writes(etcdBackend{f.store}), httpfence.Config{
				Verifier: v, Fencer: f.store, Metrics: reg, Logger: slog.New(slog.NewJSONHandler(&logs, nil)),
			})
			require.NoError(t, err)
			srv := httptest.NewServer(h)
			defer srv.Close()
			client := &http.Client{Transport: &httpfence.Transport{Base: srv.Client().Transport, Required: true}}

			want := map[string]float64{}
			admitted := 0.0
			ownerWrites := func() {
				t.Helper()
				_, err := put(held.Context, client, srv.URL, "owned", "by the owner")
				require.NoError(t, err, "the live owner is admitted")
				admitted++
				floor, err := f.store.Floor(context.Background(), scope)
				require.NoError(t, err)
				require.Equal(t, owner.Epoch, floor, "the floor is the owner's")
			}
			refused := func(status int, kind httpfence.RefusalKind, reason, tok, sig string) {
				t.Helper()
				got, ref := attempt(t, srv.URL, tok, sig)
				require.Equal(t, status, got, "%s %s", tok, sig)
				require.NotNil(t, ref)
				require.Equal(t, kind, ref.Kind)
				want[reason]++
				ownerWrites()
			}

			ownerWrites()
			madeUp := map[string]string{"claims": "unknown-epoch", "signature": "unsigned"}[name]
			for _, e := range []int64{owner.Epoch + 1, owner.Epoch + 1e9, math.MaxInt64} {
				tok := fence.Token{Scope: scope, Epoch: e}.String()
				refused(http.StatusForbidden, httpfence.RefusalUnverified, madeUp, tok, "")
				// Signed by someone else's key under the fleet's key ID.
				sig, err := other.Sign(fence.Token{Scope: scope, Epoch: e})
				require.NoError(t, err)
				if name == "signature" {
					refused(http.StatusForbidden, httpfence.RefusalUnverified, "bad-signature", tok, sig.String())
				} else {
					refused(http.StatusForbidden, httpfence.RefusalUnverified, madeUp, tok, sig.String())
				}
			}
			older := fence.Token{Scope: scope, Epoch: owner.Epoch - 1}.String()
			if name == "claims" {
				refused(http.StatusConflict, httpfence.RefusalStale, "stale", older, "")
				refused(http.StatusForbidden, httpfence.RefusalUnverified, "unknown-scope", "leader/x@9", "")
				refused(http.StatusForbidden, httpfence.RefusalUnverified, "unknown-scope", "p/8@9", "")
			} else {
				refused(http.StatusForbidden, httpfence.RefusalUnverified, "unsigned", older, "")
				refused(http.StatusForbidden, httpfence.RefusalUnverified, "unsigned", owner.String(), "")

				wrongKid, err := unknown.Sign(owner)
				require.NoError(t, err)
				refused(http.StatusForbidden, httpfence.RefusalUnverified, "unknown-key", owner.String(), wrongKid.String())
				swapped := ownerSig
				swapped.KeyID = "k0" // the fleet's signature, presented under another key ID
				refused(http.StatusForbidden, httpfence.RefusalUnverified, "bad-signature", owner.String(), swapped.String())
				tampered := fence.Token{Scope: scope, Epoch: owner.Epoch + 1}
				refused(http.StatusForbidden, httpfence.RefusalUnverified, "bad-signature", tampered.String(), ownerSig.String())
				moved := fence.Token{Scope: fence.PartitionScope(p + 1), Epoch: owner.Epoch}
				refused(http.StatusForbidden, httpfence.RefusalUnverified, "bad-signature", moved.String(), ownerSig.String())
				refused(http.StatusForbidden, httpfence.RefusalUnverified, "bad-signature", owner.String(), "k1:not-a-signature")
				refused(http.StatusForbidden, httpfence.RefusalUnverified, "bad-signature", owner.String(), strings.TrimSuffix(ownerSig.String(), ownerSig.String()[len(ownerSig.String())-2:]))
				// The fleet's own signature, sent raw: admitted.
				status, ref := attempt(t, srv.URL, owner.String(), ownerSig.String())
				require.Equal(t, http.StatusOK, status, "%v", ref)
				admitted++
			}

			total := 0.0
			for reason, n := range want {
				total += n
				require.Equal(t, n, testsupport.MustMetric(t, reg, "tenure_fence_verify_refusals_total",
					map[string]string{"store": "http", "reason": reason}), reason)
			}
			for _, reason := range []string{"stale", "unsigned", "bad-signature", "unknown-key", "unknown-epoch", "unknown-scope", "unverified", "unavailable"} {
				if _, ok := want[reason]; !ok {
					require.Zero(t, testsupport.MustMetric(t, reg, "tenure_fence_verify_refusals_total",
						map[string]string{"store": "http", "reason": reason}), reason)
				}
			}
			require.Equal(t, admitted, testsupport.MustMetric(t, reg, "tenure_fence_admitted_total", map[string]string{"store": "http"}))
			partitionRefusals := total
			if name == "claims" {
				partitionRefusals -= 1 // leader/x
				require.Equal(t, 1.0, testsupport.MustMetric(t, reg, "tenure_fence_rejections_total", map[string]string{"store": "http", "scope_kind": "leader"}))
			}
			require.Equal(t, partitionRefusals, testsupport.MustMetric(t, reg, "tenure_fence_rejections_total", map[string]string{"store": "http", "scope_kind": "partition"}))

			log := logs.String()
			require.Equal(t, int(total), strings.Count(log, "token refused by the verifier"), log)
			require.NotContains(t, log, ownerSig.String()[len("k1:"):], "no signature is logged")
			require.Contains(t, log, `"reason":"`+madeUp+`"`)
		})
	}
}

// TestTransportSignature: Transport sends the signature of the context's
// token, and removes a signature header the caller set when the context's
// token has none; the caller's request is not modified.
func TestTransportSignature(t *testing.T) {
	signer, _ := newSigner(t, "k1")
	tok := fence.Token{Scope: "p/1", Epoch: 3}
	sig, err := signer.Sign(tok)
	require.NoError(t, err)
	headers := make(chan http.Header, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { headers <- r.Header.Clone() }))
	defer srv.Close()
	client := &http.Client{Transport: &httpfence.Transport{Base: srv.Client().Transport}}
	send := func(ctx context.Context) http.Header {
		t.Helper()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		req.Header.Set(httpfence.SignatureHeader, "k9:caller")
		resp, err := client.Do(req)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Equal(t, "k9:caller", req.Header.Get(httpfence.SignatureHeader), "the caller's request is not modified")
		return <-headers
	}
	h := send(fence.NewSignedContext(context.Background(), tok, sig))
	require.Equal(t, tok.String(), h.Get(httpfence.Header))
	require.Equal(t, sig.String(), h.Get(httpfence.SignatureHeader))
	got, err := httpfence.SignatureFromHeader(h)
	require.NoError(t, err)
	require.Equal(t, sig, got)

	h = send(fence.NewContext(context.Background(), tok))
	require.Equal(t, tok.String(), h.Get(httpfence.Header))
	require.Empty(t, h.Values(httpfence.SignatureHeader), "no signature for an unsigned token")

	_, err = httpfence.SignatureFromHeader(http.Header{httpfence.SignatureHeader: {sig.String(), sig.String()}})
	require.ErrorIs(t, err, fence.ErrBadSignature)
	got, err = httpfence.SignatureFromHeader(http.Header{})
	require.NoError(t, err)
	require.True(t, got.IsZero())
}
