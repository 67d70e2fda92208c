package election_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/election"
	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestSignedTerms: with a Signer, every term's token is signed: the
// signature verifies with the public key alone, and Run's fn finds it in
// its context next to the token; without one, terms go unsigned.
func TestSignedTerms(t *testing.T) {
	c := cluster.New(t, 1)
	cli := c.NewClient(t)
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	require.NoError(t, err)
	signer, err := fence.NewSigner("k1", priv)
	require.NoError(t, err)
	v, err := fence.NewSignatureVerifier(map[string]ed25519.PublicKey{"k1": pub})
	require.NoError(t, err)
	ctx := testCtx(t)

	s := newSession(t, cli, shortTTL)
	e, err := election.NewElection(s, cli, cli, election.ElectionConfig{Cluster: testCluster, Name: "signed", ID: "a", Signer: signer})
	require.NoError(t, err)
	term, err := e.Campaign(ctx)
	require.NoError(t, err)
	require.NoError(t, v.Verify(ctx, term.Token(), term.Signature()))
	require.NoError(t, term.Resign(ctx))

	errDone := errors.New("done")
	err = e.Run(ctx, func(ctx context.Context, tok fence.Token) error {
		got, ok := fence.FromContext(ctx)
		require.True(t, ok)
		require.Equal(t, tok, got)
		sig, ok := fence.SignatureFromContext(ctx)
		require.True(t, ok, "fn's context carries the signature")
		require.NoError(t, v.Verify(ctx, tok, sig))
		return errDone
	})
	require.ErrorIs(t, err, errDone)

	plain := newElection(t, s, cli, "plain", "a")
	term, err = plain.Campaign(ctx)
	require.NoError(t, err)
	require.True(t, term.Signature().IsZero())
	require.ErrorIs(t, v.Verify(ctx, term.Token(), term.Signature()), fence.ErrUnsigned)
	require.NoError(t, term.Resign(ctx))
}
