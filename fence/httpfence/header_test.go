package httpfence_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/httpfence"
)

func TestHeaderRoundTrip(t *testing.T) {
	for _, tok := range []fence.Token{
		{Scope: "p/17", Epoch: 1},
		{Scope: "leader/billing", Epoch: 1<<63 - 1},
		{Scope: "a@b", Epoch: 42},
		{Scope: "ключ", Epoch: 7},
	} {
		h := http.Header{}
		require.NoError(t, httpfence.SetHeader(h, tok, fence.Signature{}))
		got, ok, err := httpfence.FromHeader(h)
		require.NoError(t, err)
		require.True(t, ok)
		require.Equal(t, tok, got)
	}
	_, ok, err := httpfence.FromHeader(http.Header{})
	require.NoError(t, err)
	require.False(t, ok)
}

func TestHeaderRejects(t *testing.T) {
	for _, v := range []string{
		"", "p/1", "p/1@", "@5", "p/1@0", "p/1@-3", "p/1@+3", "p/1@007", "p/1@12a",
		"p/1@9223372036854775808", "p 1@3", "\xff@3", strings.Repeat("x", fence.MaxScopeLen+1) + "@1",
	} {
		h := http.Header{}
		h.Set(httpfence.Header, v)
		_, ok, err := httpfence.FromHeader(h)
		require.True(t, ok, "%q", v)
		require.ErrorIs(t, err, fence.ErrInvalidToken, "%q", v)
	}
	h := http.Header{}
	h.Add(httpfence.Header, "p/1@3")
	h.Add(httpfence.Header, "p/1@4")
	_, _, err := httpfence.FromHeader(h)
	require.ErrorIs(t, err, fence.ErrInvalidToken, "two tokens are ambiguous")

	for _, tok := range []fence.Token{{}, {Scope: "p/1"}, {Scope: "p/1", Epoch: -1}, {Epoch: 3}} {
		h := http.Header{}
		require.ErrorIs(t, httpfence.SetHeader(h, tok, fence.Signature{}), fence.ErrInvalidToken)
		require.Empty(t, h)
	}
}

// FuzzFromHeader: reading any header value never panics, and whatever it
// accepts writes back to the same value.
func FuzzFromHeader(f *testing.F) {
	for _, s := range []string{"p/1@3", "leader/x@9223372036854775807", "@", "a@b@c@1", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		h := http.Header{}
		h[httpfence.Header] = []string{v}
		tok, ok, err := httpfence.FromHeader(h)
		if !ok {
			t.Fatal("header present but reported absent")
		}
		if err != nil {
			return
		}
		h2 := http.Header{}
		if err := httpfence.SetHeader(h2, tok, fence.Signature{}); err != nil {
			t.Fatalf("accepted %q but cannot write it back: %v", v, err)
		}
		if h2.Get(httpfence.Header) != v {
			t.Fatalf("%q read back as %q", v, h2.Get(httpfence.Header))
		}
	})
}
