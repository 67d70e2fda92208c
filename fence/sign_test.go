package fence_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/fence"
)

func newKey(t testing.TB) (ed25519.PublicKey, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	return pub, priv
}

// TestSignAndVerify: a signature verifies for exactly the token and key ID
// it was made for, also after the verifier has remembered it; every
// mismatch is refused with its own sentinel, all wrapping ErrUnverified.
func TestSignAndVerify(t *testing.T) {
	ctx := context.Background()
	pub1, priv1 := newKey(t)
	pub2, priv2 := newKey(t)
	s1, err := fence.NewSigner("k1", priv1)
	require.NoError(t, err)
	require.Equal(t, "k1", s1.KeyID())
	require.Equal(t, pub1, s1.Public())
	s2, err := fence.NewSigner("k2", priv2)
	require.NoError(t, err)
	forger, err := fence.NewSigner("k1", func() ed25519.PrivateKey { _, k := newKey(t); return k }())
	require.NoError(t, err)
	v, err := fence.NewSignatureVerifier(map[string]ed25519.PublicKey{"k1": pub1, "k2": pub2})
	require.NoError(t, err)

	tok := fence.Token{Scope: "p/3", Epoch: 42}
	sig, err := s1.Sign(tok)
	require.NoError(t, err)
	for range 2 { // the second time from the verifier's memory
		require.NoError(t, v.Verify(ctx, tok, sig))
	}
	sig2, err := s2.Sign(tok)
	require.NoError(t, err)
	require.NoError(t, v.Verify(ctx, tok, sig2), "rotation: either key")

	forged, err := forger.Sign(tok)
	require.NoError(t, err)
	swapped := sig
	swapped.KeyID = "k2"
	flipped := sig
	flipped.Sig[7] ^= 1
	_, priv3 := newKey(t)
	s3, err := fence.NewSigner("k3", priv3)
	require.NoError(t, err)
	unknown, err := s3.Sign(tok)
	require.NoError(t, err)
	for name, c := range map[string]struct {
		tok  fence.Token
		sig  fence.Signature
		want error
	}{
		"unsigned":          {tok, fence.Signature{}, fence.ErrUnsigned},
		"another key":       {tok, forged, fence.ErrBadSignature},
		"another key ID":    {tok, swapped, fence.ErrBadSignature},
		"flipped bit":       {tok, flipped, fence.ErrBadSignature},
		"unknown key ID":    {tok, unknown, fence.ErrUnknownKey},
		"epoch + 1":         {fence.Token{Scope: "p/3", Epoch: 43}, sig, fence.ErrBadSignature},
		"epoch - 1":         {fence.Token{Scope: "p/3", Epoch: 41}, sig, fence.ErrBadSignature},
		"other scope":       {fence.Token{Scope: "p/4", Epoch: 42}, sig, fence.ErrBadSignature},
		"scope with suffix": {fence.Token{Scope: "p/3@4", Epoch: 2}, sig, fence.ErrBadSignature},
	} {
		err := v.Verify(ctx, c.tok, c.sig)
		require.ErrorIs(t, err, c.want, name)
		require.ErrorIs(t, err, fence.ErrUnverified, name)
	}
	require.NoError(t, v.Verify(ctx, tok, sig), "still admitted after the refusals")

	// A signature is bound to the domain: the same key signing the bare
	// token text does not make a token signature.
	var raw fence.Signature
	raw.KeyID = "k1"
	copy(raw.Sig[:], ed25519.Sign(priv1, []byte(tok.String())))
	require.ErrorIs(t, v.Verify(ctx, tok, raw), fence.ErrBadSignature)

	_, err = s1.Sign(fence.Token{Scope: "p/3"})
	require.ErrorIs(t, err, fence.ErrInvalidToken)
	_, err = (*fence.Signer)(nil).Sign(tok)
	require.ErrorIs(t, err, fence.ErrNilArgument)
	require.ErrorIs(t, (*fence.SignatureVerifier)(nil).Verify(ctx, tok, sig), fence.ErrNilArgument)
}

func TestSignerAndVerifierConfig(t *testing.T) {
	pub, priv := newKey(t)
	for name, kid := range map[string]string{"empty": "", "colon": "a:b", "space": "a b", "NUL": "a\x00", "long": strings.Repeat("k", 65)} {
		_, err := fence.NewSigner(kid, priv)
		require.ErrorIs(t, err, fence.ErrInvalidKey, name)
		_, err = fence.NewSignatureVerifier(map[string]ed25519.PublicKey{kid: pub})
		require.ErrorIs(t, err, fence.ErrInvalidKey, name)
	}
	_, err := fence.NewSigner("k", priv[:10])
	require.ErrorIs(t, err, fence.ErrInvalidKey)
	_, err = fence.NewSigner("k", nil)
	require.ErrorIs(t, err, fence.ErrInvalidKey)
	_, err = fence.NewSignatureVerifier(nil)
	require.ErrorIs(t, err, fence.ErrInvalidKey)
	_, err = fence.NewSignatureVerifier(map[string]ed25519.PublicKey{"k": pub[:5]})
	require.ErrorIs(t, err, fence.ErrInvalidKey)
	_, err = fence.NewSigner("2026-11_a.b", priv)
	require.NoError(t, err)
}

func TestParseSignature(t *testing.T) {
	_, priv := newKey(t)
	s, err := fence.NewSigner("k1", priv)
	require.NoError(t, err)
	sig, err := s.Sign(fence.Token{Scope: "p/1", Epoch: 1})
	require.NoError(t, err)
	got, err := fence.ParseSignature(sig.String())
	require.NoError(t, err)
	require.Equal(t, sig, got)
	text := sig.String()
	for _, bad := range []string{"", "k1", ":" + text[3:], "k1:", text + "A", text[:len(text)-1], "k 1" + text[2:],
		"k1:" + strings.Repeat("=", 86), "k1:" + strings.Repeat("+", 86)} {
		_, err := fence.ParseSignature(bad)
		require.ErrorIs(t, err, fence.ErrBadSignature, "%q", bad)
	}
}

func FuzzParseSignature(f *testing.F) {
	f.Add("k1:" + strings.Repeat("A", 86))
	f.Add("")
	f.Add("a:b:c")
	f.Fuzz(func(t *testing.T, s string) {
		sig, err := fence.ParseSignature(s)
		if err != nil {
			require.ErrorIs(t, err, fence.ErrBadSignature)
			return
		}
		require.Equal(t, s, sig.String(), "canonical round trip")
	})
}

// TestSignedContext: the signature travels with its token, and a token set
// later hides it.
func TestSignedContext(t *testing.T) {
	_, priv := newKey(t)
	s, err := fence.NewSigner("k1", priv)
	require.NoError(t, err)
	tok := fence.Token{Scope: "p/1", Epoch: 5}
	sig, err := s.Sign(tok)
	require.NoError(t, err)

	ctx := fence.NewSignedContext(context.Background(), tok, sig)
	got, ok := fence.FromContext(ctx)
	require.True(t, ok)
	require.Equal(t, tok, got)
	gotSig, ok := fence.SignatureFromContext(ctx)
	require.True(t, ok)
	require.Equal(t, sig, gotSig)

	later := fence.NewContext(ctx, fence.Token{Scope: "p/1", Epoch: 6})
	_, ok = fence.SignatureFromContext(later)
	require.False(t, ok, "a signature never outlives its token")
	_, ok = fence.SignatureFromContext(context.Background())
	require.False(t, ok)
	_, ok = fence.SignatureFromContext(fence.NewSignedContext(context.Background(), tok, fence.Signature{}))
	require.False(t, ok)
}
