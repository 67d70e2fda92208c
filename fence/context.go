package fence

import "context"

type tokenKey struct{}

// NewContext returns a copy of ctx that carries t.
func NewContext(ctx context.Context, t Token) context.Context {
	return context.WithValue(ctx, tokenKey{}, t)
}

// FromContext returns the token carried by ctx, if any.
func FromContext(ctx context.Context) (Token, bool) {
	t, ok := ctx.Value(tokenKey{}).(Token)
	return t, ok
}
