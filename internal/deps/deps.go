//go:build tools

// Package deps pins the modules the project's packages import while they are
// being written. It is never built.
package deps

import (
	_ "github.com/anishathalye/porcupine"
	_ "github.com/buraksezer/consistent"
	_ "github.com/cespare/xxhash/v2"
	_ "github.com/hashicorp/go-hclog"
	_ "github.com/jackc/pgx/v5"
	_ "github.com/jackc/pgx/v5/stdlib"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/prometheus/client_golang/prometheus/testutil"
	_ "github.com/stretchr/testify/assert"
	_ "github.com/stretchr/testify/require"
	_ "go.etcd.io/etcd/api/v3/mvccpb"
	_ "go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	_ "go.etcd.io/etcd/client/v3"
	_ "go.etcd.io/etcd/client/v3/concurrency"
	_ "go.etcd.io/etcd/server/v3/embed"
	_ "go.uber.org/goleak"
	_ "modernc.org/sqlite"
)
