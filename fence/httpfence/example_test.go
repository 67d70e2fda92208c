package httpfence_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/httpfence"
)

// A downstream service fences its callers' tokens, and admits only tokens
// the fleet signed; a caller's client sends the token and signature of its
// context. The fleet's nodes hold the private key (ownership.Config.Signer
// signs every tenure's token), the service only the public key.
func Example() {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		log.Fatal(err)
	}
	signer, err := fence.NewSigner("2026-11", priv)
	if err != nil {
		log.Fatal(err)
	}
	verifier, err := fence.NewSignatureVerifier(map[string]ed25519.PublicKey{"2026-11": pub})
	if err != nil {
		log.Fatal(err)
	}

	var gate fence.Gate
	h, err := httpfence.New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := fence.FromContext(r.Context())
		fmt.Fprintf(w, "accepted %s", tok)
	}), httpfence.Config{Verifier: verifier, Fencer: &gate})
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	client := &http.Client{Transport: &httpfence.Transport{Base: srv.Client().Transport}}

	call := func(ctx context.Context) {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, nil)
		if err != nil {
			log.Fatal(err)
		}
		resp, err := client.Do(req)
		if err != nil {
			log.Fatal(err)
		}
		defer resp.Body.Close()
		if err := httpfence.ResponseError(resp); err != nil {
			fmt.Println(resp.StatusCode, errors.Is(err, fence.ErrStale), errors.Is(err, fence.ErrUnverified))
			return
		}
		b, _ := io.ReadAll(resp.Body)
		fmt.Println(resp.StatusCode, string(b))
	}
	issued := func(t fence.Token) context.Context { // as a node issues it
		sig, err := signer.Sign(t)
		if err != nil {
			log.Fatal(err)
		}
		return fence.NewSignedContext(context.Background(), t, sig)
	}
	call(issued(fence.Token{Scope: "p/9", Epoch: 7}))
	call(issued(fence.Token{Scope: "p/9", Epoch: 8}))                                       // a new owner
	call(issued(fence.Token{Scope: "p/9", Epoch: 7}))                                       // the old one, resumed
	call(fence.NewContext(context.Background(), fence.Token{Scope: "p/9", Epoch: 1 << 40})) // made up
	// Output:
	// 200 accepted p/9@7
	// 200 accepted p/9@8
	// 409 true false
	// 403 false true
}
