// Package restore tests a fleet through a restore of etcd from a snapshot:
// etcd's revisions, and with them the fleet's epochs, go back to the
// snapshot's, while floors kept outside etcd (a SQL fences table) do not.
// Its test runs etcd members in their own processes (sim/cluster), nodes
// under keyed load through router.Client with writes fenced in etcd
// (etcdfence) and in SQLite (sqlfence), restores a snapshot with and
// without etcdutl's --bump-revision (the value tenurectl rewind-check
// prints), and checks what the fleet reports and that no write was
// admitted below a recorded floor. It has no code of its own.
package restore
