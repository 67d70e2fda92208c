package httpfence_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/httpfence"
)

// A downstream service fences its callers' tokens; a caller's client sends
// the token of its context.
func Example() {
	var gate fence.Gate
	h, err := httpfence.Middleware(gate.Fencer(), http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, _ := fence.FromContext(r.Context())
		fmt.Fprintf(w, "accepted %s", tok)
	}))
	if err != nil {
		log.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	client := &http.Client{Transport: &httpfence.Transport{Base: srv.Client().Transport}}

	call := func(t fence.Token) {
		ctx := fence.NewContext(context.Background(), t)
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
			fmt.Println(resp.StatusCode, errors.Is(err, fence.ErrStale), err)
			return
		}
		b, _ := io.ReadAll(resp.Body)
		fmt.Println(resp.StatusCode, string(b))
	}
	call(fence.Token{Scope: "p/9", Epoch: 7})
	call(fence.Token{Scope: "p/9", Epoch: 8}) // a new owner
	call(fence.Token{Scope: "p/9", Epoch: 7}) // the old one, resumed
	// Output:
	// 200 accepted p/9@7
	// 200 accepted p/9@8
	// 409 true fence: stale token for scope "p/9": epoch 7 < current epoch 8
}
