package router_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/httpfence"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestSignedTokensReachTheWork: in a fleet whose nodes sign their tokens,
// the work Do runs (under a caller's context that can end and one that
// cannot) and the requests the HTTP handler serves, locally or forwarded,
// carry the token's valid signature, in the context and in
// httpfence.SignatureHeader; a signature header sent by the caller is never
// passed on. An outside Client verifies the same tokens against the
// fleet's claims.
func TestSignedTokensReachTheWork(t *testing.T) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	signer, err := fence.NewSigner("k1", priv)
	require.NoError(t, err)
	v, err := fence.NewSignatureVerifier(map[string]ed25519.PublicKey{"k1": pub})
	require.NoError(t, err)

	type got struct {
		tok    fence.Token
		sig    fence.Signature
		header string
	}
	reqs := make(chan got, 16)
	f := newFleet(t, cluster.New(t, 1), "signed", fleetOptions{Signer: signer, Handler: func(*member) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tok, _ := fence.FromContext(r.Context())
			sig, _ := fence.SignatureFromContext(r.Context())
			reqs <- got{tok: tok, sig: sig, header: r.Header.Get(httpfence.SignatureHeader)}
		})
	}})
	f.start("a")
	f.start("b")
	f.waitStable()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	hc := newHTTPClient(t)

	rc, err := router.NewClient(ctx, f.cli, router.ClientConfig{Cluster: "signed", Partitions: 16})
	require.NoError(t, err)
	defer rc.Close()

	for i := range 6 {
		key := "key-" + strconv.Itoa(i)
		owner, other := f.owner(key), f.nonOwner(key)
		for _, c := range []context.Context{ctx, context.Background()} {
			require.NoError(t, owner.router.Do(c, key, func(ctx context.Context, tok fence.Token) error {
				sig, ok := fence.SignatureFromContext(ctx)
				require.True(t, ok, "Do's work carries the signature")
				return v.Verify(ctx, tok, sig)
			}))
		}
		for _, via := range []*member{owner, other} {
			req, err := http.NewRequest(http.MethodGet, "http://"+via.addr+"/k/"+key, nil)
			require.NoError(t, err)
			req.Header.Set(httpfence.SignatureHeader, "k1:"+strings.Repeat("A", 86)) // never passed on
			resp, err := hc.Do(req)
			require.NoError(t, err)
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			require.Equal(t, http.StatusOK, resp.StatusCode)
			g := <-reqs
			require.NoError(t, v.Verify(ctx, g.tok, g.sig))
			hsig, err := fence.ParseSignature(g.header)
			require.NoError(t, err)
			require.Equal(t, g.sig, hsig)
			// The outside Client verifies the same token against the claims.
			waitUntil(t, 20*time.Second, "client sees the claim", func() (string, <-chan struct{}) {
				ch := rc.Changed()
				if rc.Lookup(key).Epoch != g.tok.Epoch {
					return "claim not seen", ch
				}
				return "", nil
			})
			require.NoError(t, rc.Verify(ctx, g.tok, fence.Signature{}))
			require.ErrorIs(t, rc.Verify(ctx, fence.Token{Scope: g.tok.Scope, Epoch: g.tok.Epoch + 1}, fence.Signature{}), fence.ErrUnknownEpoch)
		}
	}
}
