// Package memberspec holds what sim/cluster's embedded members and its process
// members (sim/cluster/etcdmember) share, so that both run etcd with the same
// settings: a member's Spec, the embed configuration built from it, the
// command-line flags that carry it to a child process, and the lines a child
// reports on its standard output.
package memberspec

import (
	"errors"
	"flag"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

// ClusterToken is the initial cluster token of every sim cluster.
const ClusterToken = "tenure-test"

// Spec is what makes one etcd member: its name, data directory, URLs, the
// initial cluster and raft's timing. It stays the same across restarts.
type Spec struct {
	Name           string
	Dir            string
	ClientURL      url.URL
	PeerURL        url.URL
	InitialCluster string // name=peerURL,...
	Tick           time.Duration
	Election       time.Duration
	// AuthTokenTTL is how long a simple auth token lives unused, in whole
	// seconds; zero means etcd's default (5m). It matters once
	// authentication is enabled.
	AuthTokenTTL time.Duration
	// Join makes the member join a running cluster that already lists it
	// (etcd's --initial-cluster-state existing, after a MemberAdd) instead
	// of bootstrapping a new one. It matters only on the first start, while
	// the data directory is empty.
	Join bool
	// QuotaBackendBytes is the size of the database at which etcd raises
	// its NOSPACE alarm (--quota-backend-bytes); zero means etcd's default
	// (2 GiB).
	QuotaBackendBytes int64
}

// bcryptCost is the cost of the password hashes of every sim cluster:
// bcrypt's minimum, so that authenticating (every new client stream does)
// costs microseconds instead of tens of milliseconds of CPU.
const bcryptCost = 4

// EmbedConfig returns the embed configuration that runs s, logging to lg.
func (s Spec) EmbedConfig(lg *zap.Logger) *embed.Config {
	ec := embed.NewConfig()
	ec.Name = s.Name
	ec.Dir = s.Dir
	ec.ListenClientUrls = []url.URL{s.ClientURL}
	ec.AdvertiseClientUrls = []url.URL{s.ClientURL}
	ec.ListenPeerUrls = []url.URL{s.PeerURL}
	ec.AdvertisePeerUrls = []url.URL{s.PeerURL}
	ec.InitialCluster = s.InitialCluster
	ec.InitialClusterToken = ClusterToken
	ec.ClusterState = embed.ClusterStateFlagNew
	if s.Join {
		ec.ClusterState = embed.ClusterStateFlagExisting
	}
	ec.TickMs = uint(s.Tick / time.Millisecond)
	ec.ElectionMs = uint(s.Election / time.Millisecond)
	ec.ListenMetricsUrls = nil
	ec.EnableGRPCGateway = false
	ec.UnsafeNoFsync = true
	ec.BcryptCost = bcryptCost
	if s.AuthTokenTTL > 0 {
		ec.AuthTokenTTL = uint(s.AuthTokenTTL / time.Second)
	}
	ec.QuotaBackendBytes = s.QuotaBackendBytes
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(lg)
	return ec
}

// Flags of a process member beyond its Spec.
type Flags struct {
	// LogLevel is the zap level of the logs written to standard error; empty
	// means no logs.
	LogLevel string
	// ExitOnStdinEOF makes the member exit at once when its standard input
	// ends: the parent that holds the pipe's other end has died.
	ExitOnStdinEOF bool
}

// Args returns the command-line arguments that Parse turns back into s and f.
func Args(s Spec, f Flags) []string {
	return []string{
		"-name=" + s.Name,
		"-data-dir=" + s.Dir,
		"-client-url=" + s.ClientURL.String(),
		"-peer-url=" + s.PeerURL.String(),
		"-initial-cluster=" + s.InitialCluster,
		"-tick=" + s.Tick.String(),
		"-election=" + s.Election.String(),
		"-auth-token-ttl=" + s.AuthTokenTTL.String(),
		"-join=" + strconv.FormatBool(s.Join),
		"-quota-backend-bytes=" + strconv.FormatInt(s.QuotaBackendBytes, 10),
		"-log-level=" + f.LogLevel,
		"-exit-on-stdin-eof=" + strconv.FormatBool(f.ExitOnStdinEOF),
	}
}

// Parse parses the arguments of a process member.
func Parse(args []string) (Spec, Flags, error) {
	var s Spec
	var f Flags
	var client, peer string
	fs := flag.NewFlagSet("etcdmember", flag.ContinueOnError)
	fs.StringVar(&s.Name, "name", "", "member name")
	fs.StringVar(&s.Dir, "data-dir", "", "data directory")
	fs.StringVar(&client, "client-url", "", "client URL (listen and advertise)")
	fs.StringVar(&peer, "peer-url", "", "peer URL (listen and advertise)")
	fs.StringVar(&s.InitialCluster, "initial-cluster", "", "name=peerURL,... of every member")
	fs.DurationVar(&s.Tick, "tick", 50*time.Millisecond, "raft heartbeat interval")
	fs.DurationVar(&s.Election, "election", 500*time.Millisecond, "raft election timeout")
	fs.DurationVar(&s.AuthTokenTTL, "auth-token-ttl", 0, "lifetime of an unused simple auth token, whole seconds; 0: etcd's default")
	fs.BoolVar(&s.Join, "join", false, "join a running cluster that lists this member (initial cluster state existing)")
	fs.Int64Var(&s.QuotaBackendBytes, "quota-backend-bytes", 0, "database size at which the NOSPACE alarm is raised; 0: etcd's default")
	fs.StringVar(&f.LogLevel, "log-level", "", "zap level of the logs on standard error; empty: none")
	fs.BoolVar(&f.ExitOnStdinEOF, "exit-on-stdin-eof", false, "exit when standard input ends (the parent died)")
	if err := fs.Parse(args); err != nil {
		return Spec{}, Flags{}, err
	}
	if fs.NArg() != 0 {
		return Spec{}, Flags{}, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	if s.Name == "" || s.Dir == "" || s.InitialCluster == "" {
		return Spec{}, Flags{}, errors.New("-name, -data-dir and -initial-cluster are required")
	}
	for _, u := range []struct {
		name, raw string
		dst       *url.URL
	}{{"client-url", client, &s.ClientURL}, {"peer-url", peer, &s.PeerURL}} {
		p, err := url.Parse(u.raw)
		if err != nil || p.Host == "" {
			return Spec{}, Flags{}, fmt.Errorf("-%s %q is not a URL with a host", u.name, u.raw)
		}
		*u.dst = *p
	}
	return s, f, nil
}

// A process member reports its state on standard output, one line per event:
//
//	started <member ID in hex>  the member is started and serves its peers
//	ready <member ID in hex>    the member serves requests
//	leader <member ID in hex>   the leader as the member now sees it; 0: none
//
// It reports started once, ready once, then its view of the leader at once
// and whenever it changes.
const (
	LineStarted = "started"
	LineReady   = "ready"
	LineLeader  = "leader"
)

// Line formats one report line, without the newline.
func Line(kind string, id uint64) string { return kind + " " + strconv.FormatUint(id, 16) }

// ParseLine parses a report line.
func ParseLine(line string) (kind string, id uint64, err error) {
	kind, hex, ok := strings.Cut(strings.TrimSpace(line), " ")
	if !ok || (kind != LineStarted && kind != LineReady && kind != LineLeader) {
		return "", 0, fmt.Errorf("memberspec: unknown report %q", line)
	}
	id, err = strconv.ParseUint(hex, 16, 64)
	if err != nil {
		return "", 0, fmt.Errorf("memberspec: report %q: %w", line, err)
	}
	return kind, id, nil
}
