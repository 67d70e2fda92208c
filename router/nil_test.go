package router_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/jonboulle/clockwork"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
)

// Types whose nil pointers satisfy the interfaces of router's arguments
// and Config fields: a typed nil.
type (
	nilLogger struct{ hclog.Logger }
	nilClock  struct{ clockwork.Clock }
)

// TestNilArguments: every constructor argument and interface-typed Config
// field refuses nil, a typed nil included, with an error wrapping
// ErrNilArgument (and ErrInvalidConfig for a Config field), and nothing
// panics.
func TestNilArguments(t *testing.T) {
	etcd := cluster.New(t, 1)
	f := newFleet(t, etcd, "nil", fleetOptions{Partitions: 4})
	m := f.start("solo")
	f.waitStable()
	cli := etcd.NewClient(t)
	ctx := context.Background()
	ok := http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})
	key := router.KeyFromPathValue("k")

	tests := []struct {
		name   string
		call   func() error
		config bool // a Config field: ErrInvalidConfig as well
	}{
		{"New: nil Node", func() error { _, err := router.New(nil, router.Config{}); return err }, false},
		{"New: typed nil Node", func() error { _, err := router.New((*ownership.Node)(nil), router.Config{}); return err }, false},
		{"Config.Transport", func() error {
			_, err := router.New(m.node, router.Config{Transport: (*http.Transport)(nil)})
			return err
		}, true},
		{"Config.Logger", func() error { _, err := router.New(m.node, router.Config{Logger: (*nilLogger)(nil)}); return err }, true},
		{"Config.Clock", func() error { _, err := router.New(m.node, router.Config{Clock: (*nilClock)(nil)}); return err }, true},
		{"NewClient: nil fleet.FleetClient", func() error {
			_, err := router.NewClient(ctx, nil, router.ClientConfig{Cluster: "nil"})
			return err
		}, false},
		{"NewClient: typed nil fleet.FleetClient", func() error {
			_, err := router.NewClient(ctx, (*clientv3.Client)(nil), router.ClientConfig{Cluster: "nil"})
			return err
		}, false},
		{"ClientConfig.Logger", func() error {
			_, err := router.NewClient(ctx, cli, router.ClientConfig{Cluster: "nil", Logger: (*nilLogger)(nil)})
			return err
		}, true},
		{"ClientConfig.Clock", func() error {
			_, err := router.NewClient(ctx, cli, router.ClientConfig{Cluster: "nil", Clock: (*nilClock)(nil)})
			return err
		}, true},
		{"Handler: nil KeyFunc", func() error { _, err := m.router.Handler(nil, ok); return err }, false},
		{"Handler: nil local", func() error { _, err := m.router.Handler(key, nil); return err }, false},
		{"Handler: typed nil local", func() error { _, err := m.router.Handler(key, (*http.ServeMux)(nil)); return err }, false},
		{"Handler: nil HandlerFunc", func() error { _, err := m.router.Handler(key, http.HandlerFunc(nil)); return err }, false},
		{"Do: nil fn", func() error { return m.router.Do(ctx, "k", nil) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			require.NotPanics(t, func() { err = tt.call() })
			require.ErrorIs(t, err, router.ErrNilArgument)
			if tt.config {
				require.ErrorIs(t, err, router.ErrInvalidConfig)
			}
		})
	}

	// A Handler built by hand with a nil field refuses requests instead of
	// panicking; WriteError with a nil writer writes nothing.
	rec := httptest.NewRecorder()
	(&router.Handler{Router: m.router, Local: ok}).ServeHTTP(rec, httptest.NewRequest("GET", "/", nil))
	assert.Equal(t, http.StatusServiceUnavailable, rec.Code)
	assert.Equal(t, "unavailable", rec.Header().Get("Tenure-Refusal"))
	assert.False(t, router.WriteError(nil, nil, fence.ErrStale))
}
