// Package watchstream gives an etcd watch a gRPC stream of its own, opened
// with a fresh auth token.
//
// The etcd client puts every Watch whose context carries the same outgoing
// gRPC metadata on one stream, and etcd checks each watch created on a
// stream against the auth token the stream was opened with, however long
// ago that was. A stream that a long-lived watch keeps open outlives its
// token (etcd's --auth-token-ttl, five minutes by default, counted from the
// token's last use), and from then on etcd refuses every new watch on it
// with "invalid auth token"; the client neither refreshes that token nor
// moves the watch to a new stream, so a caller that watches again gets the
// same refusal, again and again (etcd issues 12385 and 17623). The client
// authenticates every new stream afresh, so a watch on a stream of its own
// is created under a token that has just been issued.
//
// Without authentication a stream of its own costs a gRPC stream and
// nothing more; with it, one Authenticate call per watch.
package watchstream

import (
	"context"
	"math/rand/v2"
	"strconv"

	"google.golang.org/grpc/metadata"
)

// key is the gRPC metadata key that sets a watch's stream apart.
const key = "tenure-watch-stream"

// Own returns a context, derived from ctx, on which an etcd client's Watch
// opens a new gRPC stream that no other watch shares. Use it for the watch
// call only: the metadata it adds goes to etcd with every call made on it.
func Own(ctx context.Context) context.Context {
	return metadata.AppendToOutgoingContext(ctx, key, strconv.FormatUint(rand.Uint64(), 36))
}
