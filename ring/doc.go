// Package ring is the pure part of tenure's shard ownership: which partition
// a key belongs to and which node owns a partition, computed from nothing but
// the fleet's member IDs and its fixed configuration. It talks to no etcd
// and keeps no state; every node and every outside client of a fleet that
// sees the same members computes the same Ring.
//
// A key belongs to partition xxhash64(key) mod P (PartitionOf). A Ring
// assigns every partition to at most one member by bounded-load consistent
// hashing (see Ring for the algorithm and why tenure runs it itself). Config
// holds the two tunables, the partition count and the load factor; Spec is
// the form a fleet stores them in etcd, with the version of the ring
// algorithm, so that nodes and clients built differently never share a
// fleet. ValidateNodeID is the rule every node ID follows.
//
// The ownership package runs the nodes that claim the partitions a Ring
// gives them; the fleet package reads the fleet from outside.
package ring
