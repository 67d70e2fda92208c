package httpfence_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/fence/httpfence"
)

// echo answers 200 with the token its request context carries.
var echo = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	tok, ok := fence.FromContext(r.Context())
	if !ok {
		_, _ = io.WriteString(w, "no token")
		return
	}
	_, _ = io.WriteString(w, tok.String())
})

func serve(h http.Handler, header ...string) *httptest.ResponseRecorder {
	r := httptest.NewRequest(http.MethodPost, "/orders", strings.NewReader("{}"))
	for _, v := range header {
		r.Header.Add(httpfence.Header, v)
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// body reads the refusal answered in w.
func body(t *testing.T, w *httptest.ResponseRecorder) httpfence.Refusal {
	t.Helper()
	require.Equal(t, "application/json", w.Header().Get("Content-Type"))
	r, err := httpfence.ReadRefusal(w.Result())
	require.NoError(t, err)
	require.NotNil(t, r, "not a refusal")
	require.NotEmpty(t, r.Message)
	return *r
}

// middleware is httpfence.New for arguments that must be accepted, with
// InsecureNoVerify: these tests are about fencing, and present tokens of
// their own making.
func middleware(t *testing.T, f fence.Fencer, next http.Handler) *httpfence.Handler {
	t.Helper()
	h, err := httpfence.New(next, httpfence.Config{Verifier: httpfence.InsecureNoVerify{}, Fencer: f})
	require.NoError(t, err)
	return h
}

func TestHandler(t *testing.T) {
	var g fence.Gate
	h := middleware(t, &g, echo)

	w := serve(h, "p/1@5")
	require.Equal(t, http.StatusOK, w.Code)
	require.Equal(t, "p/1@5", w.Body.String(), "the handler's context carries the token")

	w = serve(h, "p/1@4")
	require.Equal(t, http.StatusConflict, w.Code)
	require.Equal(t, httpfence.Refusal{
		Kind:    httpfence.RefusalStale,
		Message: `fence: stale token for scope "p/1": epoch 4 < current epoch 5`, Scope: "p/1", Presented: 4, Current: 5,
	}, body(t, w))
	require.Equal(t, string(httpfence.RefusalStale), w.Header().Get(httpfence.RefusalHeader))

	for _, v := range []string{"p/1", "p/1@0", "p/1@-2", "p/1@x", "@1", ""} {
		w = serve(h, v)
		require.Equal(t, http.StatusBadRequest, w.Code, "%q", v)
		require.Contains(t, body(t, w).Message, "malformed", "%q", v)
	}
	w = serve(h, "p/1@5", "p/1@6")
	require.Equal(t, http.StatusBadRequest, w.Code)

	w = serve(h)
	require.Equal(t, http.StatusPreconditionRequired, w.Code)
	require.Equal(t, string(httpfence.RefusalNoToken), w.Header().Get(httpfence.RefusalHeader))

	opt, err := httpfence.New(echo, httpfence.Config{Verifier: httpfence.InsecureNoVerify{}, Fencer: &g, Optional: true})
	require.NoError(t, err)
	w = serve(opt)
	require.Equal(t, http.StatusOK, w.Code)
	require.Equal(t, "no token", w.Body.String())
	w = serve(opt, "p/1@3")
	require.Equal(t, http.StatusConflict, w.Code, "optional does not mean unchecked")

	failing := middleware(t, fence.FencerFunc(func(context.Context, fence.Token) error {
		return errors.New("etcd unreachable")
	}), echo)
	w = serve(failing, "p/1@9")
	require.Equal(t, http.StatusServiceUnavailable, w.Code)
	require.Contains(t, body(t, w).Message, "etcd unreachable")

	invalid := middleware(t, fence.FencerFunc(func(_ context.Context, t fence.Token) error {
		return errors.Join(fence.ErrInvalidToken, errors.New("scope unknown here"))
	}), echo)
	w = serve(invalid, "p/1@9")
	require.Equal(t, http.StatusBadRequest, w.Code)

	w = serve(&httpfence.Handler{}, "p/1@9")
	require.Equal(t, http.StatusServiceUnavailable, w.Code, "a Handler not made by New refuses, never passes unfenced")
}

func TestTransportAndResponseError(t *testing.T) {
	var g fence.Gate
	srv := httptest.NewServer(middleware(t, &g, echo))
	defer srv.Close()
	client := &http.Client{Transport: &httpfence.Transport{Base: srv.Client().Transport}}

	do := func(ctx context.Context) (*http.Response, string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		require.NoError(t, err)
		req.Header.Set(httpfence.Header, "forged@1") // replaced by the context's token
		resp, err := client.Do(req)
		if err != nil {
			return nil, "", err
		}
		defer resp.Body.Close()
		if rerr := httpfence.ResponseError(resp); rerr != nil {
			return resp, "", rerr
		}
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, "forged@1", req.Header.Get(httpfence.Header), "the caller's request is not modified")
		return resp, string(b), nil
	}

	ctx := context.Background()
	_, got, err := do(fence.NewContext(ctx, fence.Token{Scope: "p/2", Epoch: 10}))
	require.NoError(t, err)
	require.Equal(t, "p/2@10", got)

	resp, _, err := do(fence.NewContext(ctx, fence.Token{Scope: "p/2", Epoch: 9}))
	require.Equal(t, http.StatusConflict, resp.StatusCode)
	require.ErrorIs(t, err, fence.ErrStale)
	var se *fence.StaleError
	require.ErrorAs(t, err, &se)
	require.Equal(t, fence.StaleError{Scope: "p/2", Presented: 9, Current: 10}, *se)

	// No token in the context: the request goes as it is (here with its
	// forged header, which the server reads and refuses as stale).
	resp, _, err = do(ctx)
	require.NoError(t, err, "forged@1 is admitted: a new scope")
	require.Equal(t, http.StatusOK, resp.StatusCode)

	strict := &http.Client{Transport: &httpfence.Transport{Base: srv.Client().Transport, Required: true}}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL, strings.NewReader("x"))
	require.NoError(t, err)
	_, err = strict.Do(req)
	require.ErrorIs(t, err, fence.ErrNoToken)

	req, err = http.NewRequestWithContext(fence.NewContext(ctx, fence.Token{Scope: "p/2"}), http.MethodGet, srv.URL, nil)
	require.NoError(t, err)
	_, err = client.Do(req)
	require.ErrorIs(t, err, fence.ErrInvalidToken)

	// The server answers a missing header with 428.
	resp, err = srv.Client().Get(srv.URL)
	require.NoError(t, err)
	require.Equal(t, http.StatusPreconditionRequired, resp.StatusCode)
	require.ErrorIs(t, httpfence.ResponseError(resp), fence.ErrNoToken)
	require.NoError(t, resp.Body.Close())

	// The application's own answers are not refusals.
	require.NoError(t, httpfence.ResponseError(&http.Response{StatusCode: http.StatusConflict, Header: http.Header{}, Body: http.NoBody}))
}

// TestNilArguments: every constructor and function refuses a nil or
// typed-nil collaborator with ErrNilArgument, without panicking, and a
// Handler not made by New or a Transport built by hand with a nil Base
// refuses every request instead of panicking or passing it on unfenced.
func TestNilArguments(t *testing.T) {
	var g fence.Gate
	trust := httpfence.InsecureNoVerify{}
	for name, call := range map[string]func() error{
		"New(no fencer)": func() error { _, err := httpfence.New(echo, httpfence.Config{Verifier: trust}); return err },
		"New(nil *etcdfence.Store)": func() error {
			_, err := httpfence.New(echo, httpfence.Config{Verifier: trust, Fencer: (*etcdfence.Store)(nil)})
			return err
		},
		"New(nil FencerFunc)": func() error {
			_, err := httpfence.New(echo, httpfence.Config{Verifier: trust, Fencer: fence.FencerFunc(nil)})
			return err
		},
		"New(nil *Gate)": func() error {
			_, err := httpfence.New(echo, httpfence.Config{Verifier: trust, Fencer: (*fence.Gate)(nil)})
			return err
		},
		"New(cfg, nil)": func() error {
			_, err := httpfence.New(nil, httpfence.Config{Verifier: trust, Fencer: &g})
			return err
		},
		"New(cfg, nil HandlerFunc)": func() error {
			_, err := httpfence.New(http.HandlerFunc(nil), httpfence.Config{Verifier: trust, Fencer: &g})
			return err
		},
		"New(cfg, nil *Handler)": func() error {
			_, err := httpfence.New((*httpfence.Handler)(nil), httpfence.Config{Verifier: trust, Fencer: &g})
			return err
		},
		"New(no verifier)": func() error { _, err := httpfence.New(echo, httpfence.Config{Fencer: &g}); return err },
		"New(nil *SignatureVerifier)": func() error {
			_, err := httpfence.New(echo, httpfence.Config{Verifier: (*fence.SignatureVerifier)(nil), Fencer: &g})
			return err
		},
		"New(typed-nil registerer)": func() error {
			_, err := httpfence.New(echo, httpfence.Config{Verifier: trust, Fencer: &g, Metrics: (*prometheus.Registry)(nil)})
			return err
		},
		"WriteRefusal(nil, r)": func() error {
			return httpfence.WriteRefusal(nil, &httpfence.Refusal{Kind: httpfence.RefusalStale})
		},
		"WriteRefusal(nil *Recorder, r)": func() error {
			return httpfence.WriteRefusal((*httptest.ResponseRecorder)(nil), &httpfence.Refusal{Kind: httpfence.RefusalStale})
		},
		"ReadRefusal(nil)":   func() error { _, err := httpfence.ReadRefusal(nil); return err },
		"ResponseError(nil)": func() error { return httpfence.ResponseError(nil) },
		"Transport{Base: nil *http.Transport}": func() error {
			req := httptest.NewRequest(http.MethodGet, "http://x/", nil)
			_, err := (&httpfence.Transport{Base: (*http.Transport)(nil)}).RoundTrip(req)
			return err
		},
		"nil *Transport": func() error {
			_, err := (*httpfence.Transport)(nil).RoundTrip(httptest.NewRequest(http.MethodGet, "http://x/", nil))
			return err
		},
	} {
		var err error
		require.NotPanics(t, func() { err = call() }, name)
		require.ErrorIs(t, err, httpfence.ErrNilArgument, name)
		require.Equal(t, 1, strings.Count(err.Error(), "httpfence:"), "%s: one prefix: %v", name, err)
	}
	require.ErrorIs(t, httpfence.WriteRefusal(nil, httpfence.RefusalOf(fence.ErrStale)), httpfence.ErrNilArgument, "nothing answered on a nil writer")

	for name, h := range map[string]*httpfence.Handler{
		"zero Handler": {},
		"nil handler":  nil,
	} {
		for _, header := range [][]string{{"p/1@1"}, nil, {"bad"}} {
			var w *httptest.ResponseRecorder
			require.NotPanics(t, func() { w = serve(h, header...) }, name)
			require.Equal(t, http.StatusServiceUnavailable, w.Code, name)
			require.Equal(t, string(httpfence.RefusalUnavailable), w.Header().Get(httpfence.RefusalHeader), name)
		}
	}
}
