package grpcroute_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/tenure-go/tenure/examples/grpccounter/counterpb"
	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/router/grpcroute"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestMutualTLS runs a fleet whose nodes serve with the standard gRPC TLS
// credentials, each with a certificate that names only the address it
// advertises (three loopback addresses), and require client
// certificates, as the package documentation shows. A Client with a
// certificate of the fleet's CA reaches every owner, each connection
// verifying its node against the node's own address; a client without a
// certificate, and one that trusts another CA, get no call through.
func TestMutualTLS(t *testing.T) {
	ca, other := testsupport.NewCA(t, "fleet CA"), testsupport.NewCA(t, "another CA")
	etcd := cluster.New(t, 1)
	f := newFleet(t, etcd, "mtls", false)
	f.hosts = map[string]string{"a": "127.0.0.1", "b": "127.0.0.2", "c": "127.0.0.3"}
	nodeCerts := map[string]tls.Certificate{}
	for _, host := range f.hosts {
		nodeCerts[host] = ca.Issue(t, host, x509.ExtKeyUsageServerAuth)
	}
	f.serverOpts = []grpc.ServerOption{grpc.Creds(credentials.NewTLS(&tls.Config{
		GetCertificate: testsupport.ByLocalHost(nodeCerts), // the nodes share this process
		ClientCAs:      ca.Pool,
		ClientAuth:     tls.RequireAndVerifyClientCert,
		MinVersion:     tls.VersionTLS13,
	}))}
	f.startStable("a", "b", "c")

	dial := func(t *testing.T, cfg *tls.Config, backoff router.Backoff, log hclog.Logger) counterpb.CounterClient {
		c, err := grpcroute.NewClient(f.cli, grpcroute.ClientConfig{Key: requestKey, Backoff: backoff, Logger: log})
		require.NoError(t, err)
		t.Cleanup(c.Close)
		conn, err := c.NewConn(grpcroute.Target("mtls"), grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
		require.NoError(t, err)
		t.Cleanup(func() { _ = conn.Close() })
		return counterpb.NewCounterClient(conn)
	}

	t.Run("client certificate of the fleet's CA", func(t *testing.T) {
		counter := dial(t, &tls.Config{Certificates: []tls.Certificate{ca.Issue(t, "client", x509.ExtKeyUsageClientAuth)},
			RootCAs: ca.Pool, MinVersion: tls.VersionTLS13}, router.Backoff{}, nil)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		served := map[string]int{}
		for i := range 60 {
			key := fmt.Sprintf("k%d", i)
			reply, err := counter.Add(ctx, &counterpb.AddRequest{Key: key, Delta: 1})
			require.NoError(t, err)
			assert.Equal(t, f.owner(key).id, reply.Node, "key %s", key)
			served[reply.Node]++
		}
		assert.Len(t, served, 3, "every node served calls: %v", served)
	})

	// refused checks that a client of cfg gets no call through, and that
	// its log says why: the connection's error, which contains why.
	refused := func(t *testing.T, cfg *tls.Config, why string) {
		t.Helper()
		var out testsupport.Buffer
		log := hclog.New(&hclog.LoggerOptions{Output: &out, Level: hclog.Warn, JSONFormat: true})
		counter := dial(t, cfg, router.Backoff{MaxAttempts: 2, Initial: time.Millisecond, Max: time.Millisecond}, log)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		_, err := counter.Add(ctx, &counterpb.AddRequest{Key: "k", Delta: 1})
		require.Error(t, err)
		lines := logLines(t, out.Bytes(), "cannot connect to a node; its keys' calls wait")
		require.NotEmpty(t, lines, "no connection failure logged: %s", out.String())
		assert.NotEmpty(t, lines[0]["error"])
		assert.Contains(t, lines[0]["error"], why)
		addrs := map[any]bool{}
		for _, m := range f.list() {
			addrs[m.addr] = true
		}
		perAddr := map[any]int{}
		for _, l := range lines {
			assert.True(t, addrs[l["addr"]], "logged address %v is no node's", l["addr"])
			perAddr[l["addr"]]++
		}
		for addr, n := range perAddr {
			// gRPC reconnected during the call (its backoff starts at 1s):
			// one line per node all the same.
			assert.Equal(t, 1, n, "failures of %v logged", addr)
		}
	}
	t.Run("no client certificate", func(t *testing.T) {
		// The node refuses the handshake after the client has finished its
		// side (TLS 1.3): the client reads the node's alert ("certificate
		// required") or finds the connection closed first.
		refused(t, &tls.Config{RootCAs: ca.Pool, MinVersion: tls.VersionTLS13}, "")
	})
	t.Run("nodes of another CA", func(t *testing.T) {
		refused(t, &tls.Config{Certificates: []tls.Certificate{other.Issue(t, "client", x509.ExtKeyUsageClientAuth)},
			RootCAs: other.Pool, MinVersion: tls.VersionTLS13}, "x509: certificate signed by unknown authority")
	})
	for _, m := range f.list() {
		assert.Equal(t, int64(0), m.rs.Stats().Refused, "node %s", m.id)
	}
}
