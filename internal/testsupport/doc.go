// Package testsupport is what tenure's own tests share and nothing else
// imports: a goroutine leak check for TestMain (VerifyTestMain), a log sink
// read back while a component runs (Buffer), certificate authorities for
// the TLS tests (NewCA), the random node IDs of the ring's tests
// (RandomIDs), reads of a Prometheus registry (LookupMetric,
// WaitMetric), and spans recorded in memory (Tracing, SpansNamed,
// SpanAttr, EventsNamed). It imports no package of tenure's but internal/signal, so
// that every package's own tests can use it. The fixtures that need a
// fleet (a running etcd, nodes that settle) are the public sim/cluster and
// sim/fleettest, which users can take for their own tests.
package testsupport
