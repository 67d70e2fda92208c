// Package cluster starts real etcd clusters inside the current process, on
// loopback, for tests, simulations and examples.
//
// A Cluster runs 1 or 3 embedded etcd members (go.etcd.io/etcd/server/v3/embed)
// on free loopback ports with data in a temporary directory. It hands out
// clients, stops and restarts members, finds and stops the raft leader, and
// places a FaultPoint between one client and the cluster: a TCP proxy per
// member that can blackhole traffic, add latency and drop connections, so that
// one node can be cut off from etcd while the rest of the fleet keeps working.
//
// Close stops every member, proxy and client the cluster handed out and
// removes the data directory; nothing keeps running afterwards.
//
// The core packages of tenure never import this package: it links the etcd
// server.
package cluster
