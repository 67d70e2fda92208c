// Package ring is the pure part of tenure's shard ownership: which partition
// a key belongs to and which node owns a partition, computed from nothing but
// the fleet's member IDs and its fixed configuration. It talks to no etcd
// and keeps no state; every node and every outside client of a fleet that
// sees the same members computes the same Ring.
//
// A key belongs to partition xxhash64(key) mod P (PartitionOf). A Ring
// assigns every partition to at most one member by bounded-load hashing,
// under one of two algorithms (see Ring): AlgorithmWeighted, which gives
// members shares in proportion to their capacity weights and is what a new
// fleet records, or the count-only AlgorithmBounded. Config holds the
// tunables, the partition count, the load factor and the algorithm; Spec is
// the form a fleet stores them in etcd, so that nodes and clients
// configured or built differently never share a fleet. ValidateNodeID is
// the rule every node ID follows.
//
// The ownership package runs the nodes that claim the partitions a Ring
// gives them; the fleet package reads the fleet from outside.
package ring
