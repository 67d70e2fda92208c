package router_test

import (
	"bytes"
	"context"
	"io"
	"net/http"

	"github.com/tenure-go/tenure/router"
)

// getVia sends a GET of path to the owner of key through c.Do.
func getVia(ctx context.Context, c *router.Client, key, path string) (*http.Response, error) {
	return send(ctx, c, http.MethodGet, key, path, "", nil)
}

// postVia sends a POST of body, of the given content type, to path on the
// owner of key through c.Do.
func postVia(ctx context.Context, c *router.Client, key, path, contentType string, body []byte) (*http.Response, error) {
	return send(ctx, c, http.MethodPost, key, path, contentType, body)
}

func send(ctx context.Context, c *router.Client, method, key, path, contentType string, body []byte) (*http.Response, error) {
	var r io.Reader
	if body != nil {
		r = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, "http://tenure"+path, r)
	if err != nil {
		return nil, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	return c.Do(ctx, key, req)
}
