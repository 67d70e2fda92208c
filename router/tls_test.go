package router_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/tenure-go/tenure/internal/testsupport"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
)

// TestHTTPS runs a fleet whose nodes serve HTTPS, each with a certificate
// that names only the loopback address it advertises, and require client
// certificates of the fleet's CA; they forward to each other over HTTPS,
// presenting theirs (Config.Scheme and Transport). A Client over HTTPS
// (ClientConfig.Scheme and HTTPClient) reaches every key's owner, each
// connection verifying its node by the node's own address; a request sent
// to a node that does not own its key is forwarded to the owner over
// HTTPS and served there; a caller without a certificate gets no answer.
func TestHTTPS(t *testing.T) {
	ca := testsupport.NewCA(t, "fleet CA")
	hosts := map[string]string{"a": "127.0.0.1", "b": "127.0.0.2", "c": "127.0.0.3"}
	certs := map[string]tls.Certificate{}
	for _, host := range hosts {
		certs[host] = ca.Issue(t, host, x509.ExtKeyUsageServerAuth)
	}
	transport := func(certs ...tls.Certificate) *http.Transport {
		tr := &http.Transport{TLSClientConfig: &tls.Config{Certificates: certs, RootCAs: ca.Pool, MinVersion: tls.VersionTLS13}}
		t.Cleanup(tr.CloseIdleConnections) // after the fleet has stopped
		return tr
	}
	forwarding := transport(ca.Issue(t, "node", x509.ExtKeyUsageClientAuth))
	callers := transport(ca.Issue(t, "caller", x509.ExtKeyUsageClientAuth))
	anonymous := transport()

	etcd := cluster.New(t, 1)
	f := newFleet(t, etcd, "https", fleetOptions{
		Hosts: hosts,
		TLS: &tls.Config{GetCertificate: testsupport.ByLocalHost(certs), // the nodes share this process
			ClientCAs: ca.Pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS13},
		Router: router.Config{Scheme: "https", Transport: forwarding},
		Handler: func(m *member) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, m.id) })
		},
	})
	for id := range hosts {
		f.start(id)
	}
	f.waitStable()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	get := func(hc *http.Client, url string) (string, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		require.NoError(t, err)
		resp, err := hc.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", url, body)
		return string(body), nil
	}

	t.Run("client", func(t *testing.T) {
		c := newClient(t, f.cli, router.ClientConfig{Cluster: "https", Scheme: "https", HTTPClient: &http.Client{Transport: callers}})
		served := map[string]int{}
		for i := range 30 {
			key := fmt.Sprintf("k%d", i)
			resp, err := getVia(ctx, c, key, "/k/"+key)
			require.NoError(t, err)
			body, err := io.ReadAll(resp.Body)
			_ = resp.Body.Close()
			require.NoError(t, err)
			assert.Equal(t, f.owner(key).id, string(body), "key %s", key)
			served[string(body)]++
		}
		assert.Len(t, served, 3, "every node served: %v", served)
	})
	t.Run("forwarded", func(t *testing.T) {
		for i := range 10 {
			key := fmt.Sprintf("f%d", i)
			body, err := get(&http.Client{Transport: callers}, "https://"+f.nonOwner(key).addr+"/k/"+key)
			require.NoError(t, err)
			assert.Equal(t, f.owner(key).id, body, "key %s", key)
		}
	})
	t.Run("no client certificate", func(t *testing.T) {
		_, err := get(&http.Client{Transport: anonymous}, "https://"+f.list()[0].addr+"/k/x")
		require.Error(t, err)
	})
}
