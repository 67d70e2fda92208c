// Package doccheck holds the tests that keep tenure's documentation true:
// docs are code. It has no code of its own; its tests check, against the
// program as it is built and run:
//
//   - Snippets: every ```go block of README.md and of the examples'
//     READMEs, and every indented Go block of a doc.go package comment,
//     compiles. Each block is the body of a function that returns an
//     error, in a package of its own generated inside the module (so that
//     tenure's packages and the module's dependencies resolve) and built
//     with go build, with //line directives that point the compiler's
//     errors at the document's lines. The names a README block uses but
//     does not declare are declared by the HTML comment right above it,
//     <!-- go: declarations -->, which GitHub does not render; imports are
//     added by package name from a fixed table (imports in
//     snippets_test.go); every variable a block declares at its top level
//     counts as used. A doc.go block's declarations live in the table
//     docBlocks of snippets_test.go, keyed by file and first line, which
//     also lists the indented blocks that are not Go (SQL, shell, tables,
//     formulas), so that a Go block that stops parsing fails too.
//   - Metrics: every tenure_ metric that the READMEs, the doc.go metric
//     tables and the library's comments name is registered, with the
//     labels they name, by a component: Nodes on a real embedded etcd,
//     a Router, a router.Client, an Election, the etcd, SQLite and HTTP
//     fences, a Balancer, a grpcroute Server and Client, all on one
//     registry. Every metric registered is in README.md's metric table,
//     and the tables' types and label values agree with what the
//     registry gathers.
//   - Spans: every span name and span attribute (tenure.move.out,
//     tenure.partition) that the READMEs, the doc.go files and the
//     tracing tables of the packages' trace.go name is one the program
//     declares (a const named span..., or an attribute.Key("tenure...")
//     const); each span name is declared once, and README.md names every
//     one.
//   - Logs: the events README.md's "Logs" paragraph names are lines a
//     real node prints (JSON hclog into a buffer) as it joins, acquires,
//     hands off, is drained, has a claim force-released and a store
//     refuse its epoch, loses its session to an etcd it cannot reach, and
//     leaves; with the fields the paragraph names.
package doccheck
