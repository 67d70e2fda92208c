package fence

import "context"

type tokenKey struct{}

// carried is what a context carries under tokenKey: a token and the
// signature issued with it, if any, set together so that a signature never
// outlives its token in a context.
type carried struct {
	t   Token
	sig Signature
}

// NewContext returns a copy of ctx that carries t, without a signature: it
// hides any token and signature ctx carries.
func NewContext(ctx context.Context, t Token) context.Context {
	return context.WithValue(ctx, tokenKey{}, carried{t: t})
}

// NewSignedContext returns a copy of ctx that carries t and sig, the
// fleet's signature of t (Signer.Sign): FromContext returns t and
// SignatureFromContext sig. A zero sig is no signature, as NewContext.
func NewSignedContext(ctx context.Context, t Token, sig Signature) context.Context {
	return context.WithValue(ctx, tokenKey{}, carried{t: t, sig: sig})
}

// FromContext returns the token carried by ctx, if any.
func FromContext(ctx context.Context) (Token, bool) {
	c, ok := ctx.Value(tokenKey{}).(carried)
	return c.t, ok
}

// SignatureFromContext returns the signature of the token carried by ctx
// (see NewSignedContext); false if ctx carries no token or a token without
// a signature.
func SignatureFromContext(ctx context.Context) (Signature, bool) {
	c, _ := ctx.Value(tokenKey{}).(carried)
	return c.sig, !c.sig.IsZero()
}
