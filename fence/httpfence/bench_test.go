package httpfence_test

import (
	"context"
	"crypto/ed25519"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/httpfence"
)

// discard is a ResponseWriter that keeps nothing but its header map and
// status.
type discard struct {
	h      http.Header
	status int
}

func (d *discard) Header() http.Header         { return d.h }
func (d *discard) Write(p []byte) (int, error) { return len(p), nil }
func (d *discard) WriteHeader(status int)      { d.status = status }

// BenchmarkAdmission: one Handler's admission of the live owner's token
// (its ServeHTTP, in process, to a Next that answers 200) without
// verification (InsecureNoVerify), verified against the fleet's claims
// (an Observer of a real fleet: the view decides, no etcd round trip) and
// verified by signature (Ed25519), side by side in one run. The owner
// presents one token and signature for its whole tenure, which the
// signature verifier remembers once verified; signature-cold alternates
// two tokens of one scope, so that every request pays the Ed25519
// verification. The Fencer admits everything, so that the figures are
// the Handler's own cost. Each reports p50-ns, the median of the
// per-request times, besides ns/op and allocs/op (-benchmem).
func BenchmarkAdmission(b *testing.B) {
	const p = 5
	f := newFleet(b, 8)
	held := f.hold(b, p)
	sig, ok := fence.SignatureFromContext(held.Context)
	require.True(b, ok)
	sv, err := fence.NewSignatureVerifier(map[string]ed25519.PublicKey{"k1": f.public})
	require.NoError(b, err)
	ok200 := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusOK) })

	next := fence.Token{Scope: held.Token.Scope, Epoch: held.Token.Epoch + 1}
	nextSig, err := f.signer.Sign(next)
	require.NoError(b, err)
	admitAll := fence.FencerFunc(func(context.Context, fence.Token) error { return nil })
	request := func(t fence.Token, s fence.Signature) *http.Request {
		req := httptest.NewRequest(http.MethodPost, "/orders", nil)
		require.NoError(b, httpfence.SetHeader(req.Header, t, s))
		return req
	}
	owner, other := request(held.Token, sig), request(next, nextSig)

	for _, c := range []struct {
		name string
		v    httpfence.Verifier
		reqs []*http.Request
	}{
		{"verifier=none", httpfence.InsecureNoVerify{}, []*http.Request{owner}},
		{"verifier=claims", f.observer, []*http.Request{owner}},
		{"verifier=signature", sv, []*http.Request{owner}},
		{"verifier=signature-cold", sv, []*http.Request{owner, other}},
	} {
		b.Run(c.name, func(b *testing.B) {
			h, err := httpfence.New(ok200, httpfence.Config{Verifier: c.v, Fencer: admitAll})
			require.NoError(b, err)
			w := &discard{h: http.Header{}}
			times := make([]time.Duration, 0, b.N)
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				req := c.reqs[i%len(c.reqs)]
				start := time.Now()
				h.ServeHTTP(w, req)
				times = append(times, time.Since(start))
			}
			b.StopTimer()
			if w.status != http.StatusOK {
				b.Fatalf("status %d", w.status)
			}
			slices.Sort(times)
			b.ReportMetric(float64(times[len(times)/2].Nanoseconds()), "p50-ns")
		})
	}
}
