package etcdfence_test

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/etcdfence"
)

// TestNilArguments: every constructor and every method of a zero value
// refuses a nil or typed-nil collaborator with ErrNilArgument (which wraps
// ErrInvalidConfig), without panicking.
func TestNilArguments(t *testing.T) {
	ctx := context.Background()
	tok := fence.Token{Scope: "p/1", Epoch: 1}
	var zero etcdfence.Store
	var zeroBatcher etcdfence.Batcher
	for name, call := range map[string]func() error{
		"New(nil)":                  func() error { _, err := etcdfence.New(nil, etcdfence.Config{}); return err },
		"New(nil *clientv3.Client)": func() error { _, err := etcdfence.New((*clientv3.Client)(nil), etcdfence.Config{}); return err },
		"New(KV(nil *Client))": func() error {
			var kv clientv3.KV = (*clientv3.Client)(nil)
			_, err := etcdfence.New(kv, etcdfence.Config{})
			return err
		},
		"New(&clientv3.Client{})": func() error { _, err := etcdfence.New(&clientv3.Client{}, etcdfence.Config{}); return err },
		"NewBatcher(nil)":         func() error { _, err := etcdfence.NewBatcher(nil, etcdfence.BatcherConfig{}); return err },
		"NewBatcher(zero Store)":  func() error { _, err := etcdfence.NewBatcher(&zero, etcdfence.BatcherConfig{}); return err },
		"zero Store Put":          func() error { _, err := zero.Put(ctx, tok, "k", nil); return err },
		"zero Store Delete":       func() error { _, err := zero.Delete(ctx, tok, "k"); return err },
		"zero Store CAS":          func() error { _, err := zero.CompareAndSwap(ctx, tok, "k", 0, nil); return err },
		"zero Store Get":          func() error { _, err := zero.Get(ctx, tok, "k"); return err },
		"zero Store Advance":      func() error { return zero.Advance(ctx, tok) },
		"zero Store Floor":        func() error { _, err := zero.Floor(ctx, "p/1"); return err },
		"zero Store Commit": func() error {
			rs, _ := zero.Commit(ctx, []etcdfence.Write{etcdfence.PutWrite(tok, "k", nil)})
			return rs[0].Err
		},
		"zero Batcher Put":   func() error { _, err := zeroBatcher.Put(ctx, tok, "k", nil); return err },
		"zero Batcher Do":    func() error { return zeroBatcher.Do(ctx, etcdfence.PutWrite(tok, "k", nil)).Err },
		"zero Batcher Close": func() error { return zeroBatcher.Close() },
	} {
		var err error
		require.NotPanics(t, func() { err = call() }, name)
		require.ErrorIs(t, err, etcdfence.ErrNilArgument, name)
		require.ErrorIs(t, err, etcdfence.ErrInvalidConfig, name)
		require.Equal(t, 1, strings.Count(err.Error(), "etcdfence:"), "%s: one prefix: %v", name, err)
	}
}
