// Package etcdops holds the tests of tenure's fleet under what etcd's
// operators do to etcd itself, on real etcd members in their own processes
// (sim/cluster with Config.Processes): a member frozen while a node's etcd
// client holds its streams there, defragmentation of a large database one
// member at a time, a member replaced by a new one (leadership moved away
// first if it leads, member remove, member add, an empty data directory), and a rolling upgrade from etcd's previous
// minor release to the current one. Each runs keyed load through a
// router.Client, every request a fenced write to etcd (etcdfence) and to
// PostgreSQL (sqlfence; internal/pgtest starts a private server, or uses
// TENURE_PG_DSN's, and skips unless TENURE_REQUIRE_PG), and reports
// partitions lost, requests failed, and the latency of the requests during
// each operation beside the steady state before it; every acknowledged
// write has its one row in PostgreSQL and none was admitted below its
// scope's floor.
//
// The package has no code of its own; see its tests.
package etcdops
