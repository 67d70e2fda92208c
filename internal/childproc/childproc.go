// Package childproc starts the child processes of tenure's test harnesses
// (etcd members, chaos workers) so that they die with their parent (Start,
// whose Process also kills or stops them with their process group), and
// reads their output: by line (LineWriter), keeping the end for error
// messages (Tail).
package childproc
