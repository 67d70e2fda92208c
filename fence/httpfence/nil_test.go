package httpfence_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
	"github.com/tenure-go/tenure/fence/httpfence"
)

// TestNilArguments: every constructor and function refuses a nil or
// typed-nil collaborator with ErrNilArgument, without panicking, and a
// Handler or Transport built by hand with one refuses every request
// instead of panicking or passing it on unfenced.
func TestNilArguments(t *testing.T) {
	var g fence.Gate
	for name, call := range map[string]func() error{
		"Middleware(nil, h)": func() error { _, err := httpfence.Middleware(nil, echo); return err },
		"Middleware(nil *etcdfence.Store, h)": func() error {
			_, err := httpfence.Middleware((*etcdfence.Store)(nil), echo)
			return err
		},
		"Middleware(nil FencerFunc, h)": func() error { _, err := httpfence.Middleware(fence.FencerFunc(nil), echo); return err },
		"Middleware(nil *Gate .Fencer(), h)": func() error {
			_, err := httpfence.Middleware((*fence.Gate)(nil).Fencer(), echo)
			return err
		},
		"Middleware(f, nil)":             func() error { _, err := httpfence.Middleware(g.Fencer(), nil); return err },
		"Middleware(f, nil HandlerFunc)": func() error { _, err := httpfence.Middleware(g.Fencer(), http.HandlerFunc(nil)); return err },
		"Middleware(f, nil *Handler)": func() error {
			_, err := httpfence.Middleware(g.Fencer(), (*httpfence.Handler)(nil))
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
	require.False(t, httpfence.WriteError(nil, fence.ErrStale), "nothing answered on a nil writer")

	for name, h := range map[string]*httpfence.Handler{
		"no fencer":            {Next: echo},
		"typed-nil fencer":     {Fencer: (*etcdfence.Store)(nil), Next: echo},
		"nil FencerFunc":       {Fencer: fence.FencerFunc(nil), Next: echo},
		"no next":              {Fencer: g.Fencer()},
		"typed-nil next":       {Fencer: g.Fencer(), Next: http.HandlerFunc(nil)},
		"optional and no next": {Fencer: g.Fencer(), Optional: true},
		"nil handler":          nil,
	} {
		for _, header := range [][]string{{"p/1@1"}, nil, {"bad"}} {
			var w *httptest.ResponseRecorder
			require.NotPanics(t, func() { w = serve(h, header...) }, name)
			require.Equal(t, http.StatusServiceUnavailable, w.Code, name)
			require.Equal(t, string(httpfence.RefusalUnavailable), w.Header().Get(httpfence.RefusalHeader), name)
		}
	}
}
