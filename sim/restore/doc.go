// Package restore tests a fleet through a restore of etcd from a snapshot:
// etcd's revisions, and with them the fleet's epochs, go back to the
// snapshot's, while floors kept outside etcd (a SQL fences table) do not.
// Its test runs etcd members in their own processes (sim/cluster), nodes
// under keyed load through router.Client with writes fenced in etcd
// (etcdfence) and in SQLite and PostgreSQL (sqlfence; internal/pgtest
// starts PostgreSQL, or uses TENURE_PG_DSN's, and skips the test without it
// unless TENURE_REQUIRE_PG), restores a snapshot with and without
// etcdutl's --bump-revision (the value tenurectl rewind-check prints from
// either database), and checks what the fleet reports, that no write was
// admitted below a floor either database recorded and that every
// acknowledged write is in both. It has no code of its own.
package restore
