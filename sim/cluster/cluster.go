package cluster

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-go/tenure/sim/cluster/internal/memberspec"
)

// Config describes a cluster to start.
type Config struct {
	// Members is the number of etcd members: 1 or 3. Zero means 1.
	Members int
	// Dir is the parent of the members' data directories. Empty means a new
	// temporary directory, removed by Close.
	Dir string
	// TickInterval is raft's heartbeat interval. Zero means 50ms.
	TickInterval time.Duration
	// ElectionTimeout is raft's election timeout. Zero means 10 ticks.
	ElectionTimeout time.Duration
	// StartTimeout bounds how long Start and RestartMember wait for the
	// members to be ready. Zero means 30s. It does not include building the
	// member binary (see Processes).
	StartTimeout time.Duration
	// Logger receives the members' logs. Nil discards them.
	Logger *zap.Logger
	// Processes runs every member in its own OS process, the etcdmember
	// command, instead of inside this one, with the same settings (raft
	// timing included). Only process members can fail abruptly:
	// FreezeMember (SIGSTOP), ThawMember (SIGCONT) and KillMember (SIGKILL).
	// Children never outlive this process: see the package documentation.
	Processes bool
	// MemberBinary is the etcdmember executable that process members run.
	// Empty means that Start builds github.com/tenure-go/tenure/sim/cluster/etcdmember
	// with the go command, once per process, from the module of the current
	// directory (go test and go run run there), into the user's cache
	// directory. Set it where no Go toolchain is at hand. It needs Processes.
	MemberBinary string
	// MemberCPUs confines the member processes to these CPUs, a Linux CPU
	// list as taskset -c takes it ("1", "2-3", "0,2"), so that a benchmark
	// can keep etcd off the CPUs of the process under test (run that one
	// under taskset too). Empty means no confinement. It needs Processes and
	// the taskset command (util-linux).
	MemberCPUs string
	// AuthTokenTTL is how long an auth token that no request uses stays
	// valid, in whole seconds: etcd's --auth-token-ttl. Zero means etcd's
	// default, 5m. It matters only once EnableAuth has turned authentication
	// on.
	AuthTokenTTL time.Duration
	// QuotaBackendBytes is the database size at which etcd raises its
	// NOSPACE alarm: etcd's --quota-backend-bytes (see nospace.go). Zero
	// means etcd's default, 2 GiB.
	QuotaBackendBytes int64
}

// DefaultConfig returns a 1-member cluster with fast raft timing suitable for
// tests on loopback.
func DefaultConfig() Config {
	return Config{Members: 1, TickInterval: 50 * time.Millisecond, ElectionTimeout: 500 * time.Millisecond, StartTimeout: 30 * time.Second}
}

// Validate reports whether c can start a cluster.
func (c Config) Validate() error {
	if c.Members != 0 && c.Members != 1 && c.Members != 3 {
		return fmt.Errorf("%w: members %d must be 1 or 3", ErrInvalidConfig, c.Members)
	}
	if c.TickInterval < 0 || c.ElectionTimeout < 0 || c.StartTimeout < 0 {
		return fmt.Errorf("%w: durations must not be negative", ErrInvalidConfig)
	}
	tick, election := c.withDefaults().TickInterval, c.withDefaults().ElectionTimeout
	if election < 5*tick {
		return fmt.Errorf("%w: election timeout %v must be at least 5x tick interval %v", ErrInvalidConfig, election, tick)
	}
	if tick%time.Millisecond != 0 || election%time.Millisecond != 0 {
		return fmt.Errorf("%w: tick interval %v and election timeout %v must be whole milliseconds", ErrInvalidConfig, tick, election)
	}
	if c.AuthTokenTTL < 0 || c.AuthTokenTTL%time.Second != 0 {
		return fmt.Errorf("%w: auth token TTL %v must be whole seconds", ErrInvalidConfig, c.AuthTokenTTL)
	}
	if c.QuotaBackendBytes < 0 {
		return fmt.Errorf("%w: quota backend bytes %d must not be negative", ErrInvalidConfig, c.QuotaBackendBytes)
	}
	if c.MemberBinary != "" && !c.Processes {
		return fmt.Errorf("%w: member binary %q needs Processes", ErrInvalidConfig, c.MemberBinary)
	}
	if c.MemberCPUs != "" && !c.Processes {
		return fmt.Errorf("%w: member CPUs %q need Processes", ErrInvalidConfig, c.MemberCPUs)
	}
	return nil
}

func (c Config) withDefaults() Config {
	if c.Members == 0 {
		c.Members = 1
	}
	if c.TickInterval == 0 {
		c.TickInterval = 50 * time.Millisecond
	}
	if c.ElectionTimeout == 0 {
		c.ElectionTimeout = 10 * c.TickInterval
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = 30 * time.Second
	}
	if c.Logger == nil {
		c.Logger = zap.NewNop()
	}
	return c
}

// Cluster is a running etcd cluster. Its methods are safe for concurrent
// use.
type Cluster struct {
	cfg     Config
	dir     string
	tempDir bool
	command []string // etcdmember, with Processes: the command line before its flags

	mu      sync.Mutex
	members []*member
	clients []*clientv3.Client
	faults  []*FaultPoint
	closed  bool
}

// Start starts a cluster and waits until every member serves requests and a
// leader is elected. With Processes and no MemberBinary it first builds the
// member binary (see Config.MemberBinary); only ctx bounds that build.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	c := &Cluster{cfg: cfg, dir: cfg.Dir}
	if cfg.Processes {
		cmd, err := memberCommand(ctx, cfg)
		if err != nil {
			return nil, err
		}
		c.command = cmd
	}
	if c.dir == "" {
		d, err := os.MkdirTemp("", "tenure-etcd-")
		if err != nil {
			return nil, fmt.Errorf("cluster: temp dir: %w", err)
		}
		c.dir, c.tempDir = d, true
	}
	ports, err := freePorts(2 * cfg.Members)
	if err != nil {
		c.removeDir()
		return nil, err
	}
	var initial []string
	for i := range cfg.Members {
		s := memberspec.Spec{
			Name:      fmt.Sprintf("m%d", i),
			ClientURL: url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[2*i])},
			PeerURL:   url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[2*i+1])},
			Tick:      cfg.TickInterval,
			Election:  cfg.ElectionTimeout,

			AuthTokenTTL:      cfg.AuthTokenTTL,
			QuotaBackendBytes: cfg.QuotaBackendBytes,
		}
		s.Dir = filepath.Join(c.dir, s.Name)
		initial = append(initial, s.Name+"="+s.PeerURL.String())
		c.members = append(c.members, &member{index: i, spec: s})
	}
	for _, m := range c.members {
		m.spec.InitialCluster = strings.Join(initial, ",")
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	// Launch the members one after another, then wait for them together. A
	// new member first asks its peers whether it is already part of a
	// running cluster; a peer that is listening but not yet serving makes it
	// wait for etcd's 1s bootstrap timeout, while one that is serving (or
	// not listening at all) answers at once.
	errs := make([]error, len(c.members))
	runs := make([]run, len(c.members))
	for i, m := range c.members {
		runs[i], errs[i] = c.launch(ctx, m)
	}
	var wg sync.WaitGroup
	for i, m := range c.members {
		if runs[i] != nil {
			wg.Go(func() { errs[i] = c.ready(ctx, m, runs[i]) })
		}
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		_ = c.Close()
		return nil, err
	}
	if _, err := c.WaitLeader(ctx); err != nil {
		_ = c.Close()
		return nil, err
	}
	return c, nil
}

// DataDir returns the directory that holds the members' data.
func (c *Cluster) DataDir() string { return c.dir }

// Size returns the number of members, running or stopped.
func (c *Cluster) Size() int { return len(c.members) }

// Processes reports whether the members run in their own processes.
func (c *Cluster) Processes() bool { return c.cfg.Processes }

// Endpoints returns the client URLs of all members, in member order.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.members))
	for i, m := range c.members {
		eps[i] = m.spec.ClientURL.String()
	}
	return eps
}

// ClientConfig returns a client configuration for the given endpoints with
// quiet logging and short dial timeouts.
func ClientConfig(endpoints []string) clientv3.Config {
	return clientv3.Config{
		Endpoints:            endpoints,
		DialTimeout:          5 * time.Second,
		DialKeepAliveTime:    time.Second,
		DialKeepAliveTimeout: time.Second,
		Logger:               zap.NewNop(),
	}
}

// Client returns a new client connected to every member directly. Close
// closes it if the caller has not.
func (c *Cluster) Client() (*clientv3.Client, error) {
	return c.newClient(c.Endpoints())
}

// MemberClient returns a new client connected to member i only, to read
// what that member has (WithSerializable reads its local state without
// asking the leader). Close closes it if the caller has not.
func (c *Cluster) MemberClient(i int) (*clientv3.Client, error) {
	if err := c.checkIndex(i); err != nil {
		return nil, err
	}
	return c.newClient([]string{c.members[i].spec.ClientURL.String()})
}

func (c *Cluster) newClient(endpoints []string) (*clientv3.Client, error) {
	return c.clientWith(ClientConfig(endpoints))
}

// clientWith returns a new client made with cfg, which Close closes.
func (c *Cluster) clientWith(cfg clientv3.Config) (*clientv3.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("cluster: client: %w", err)
	}
	c.clients = append(c.clients, cli)
	return cli, nil
}

// FaultyClient returns a new client that reaches every member through its
// own FaultPoint, and that FaultPoint. Faults affect only this client.
func (c *Cluster) FaultyClient() (*clientv3.Client, *FaultPoint, error) {
	fp, err := c.NewFaultPoint()
	if err != nil {
		return nil, nil, err
	}
	cli, err := c.newClient(fp.Endpoints())
	if err != nil {
		return nil, nil, err
	}
	return cli, fp, nil
}

// NewFaultPoint returns a FaultPoint: one proxy in front of every member.
// Close closes it if the caller has not.
func (c *Cluster) NewFaultPoint() (*FaultPoint, error) {
	fp := &FaultPoint{}
	for _, m := range c.members {
		p, err := NewProxy(m.spec.ClientURL.Host)
		if err != nil {
			_ = fp.Close()
			return nil, err
		}
		fp.proxies = append(fp.proxies, p)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		_ = fp.Close()
		return nil, ErrClosed
	}
	c.faults = append(c.faults, fp)
	return fp, nil
}

// Leader returns the index of the member that leads the cluster, as seen by
// the running members (a frozen member sees nothing), or ErrNoLeader: no
// running member knows a leader, they disagree, or the leader they agree on
// is not running (it was just frozen, killed or stopped, and the others
// have not elected a new one yet).
func (c *Cluster) Leader() (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var leaderID uint64
	for _, m := range c.members {
		if m.state != MemberRunning {
			continue
		}
		if lead := m.run.leader(); lead != 0 {
			if leaderID != 0 && lead != leaderID {
				return -1, fmt.Errorf("%w: members disagree", ErrNoLeader)
			}
			leaderID = lead
		}
	}
	if leaderID == 0 {
		return -1, ErrNoLeader
	}
	for i, m := range c.members {
		if m.state == MemberRunning && m.id == leaderID {
			return i, nil
		}
	}
	return -1, fmt.Errorf("%w: leader %x is not a running member", ErrNoLeader, leaderID)
}

// WaitLeader waits until the running members agree on a running leader and
// returns its index.
func (c *Cluster) WaitLeader(ctx context.Context) (int, error) {
	return c.waitLeader(ctx, -1)
}

// WaitNewLeader waits until the running members agree on a running leader
// other than member old, and returns its index. Use it after failing the
// leader old: until the others notice (an election timeout after a freeze or
// a kill), they still follow old.
func (c *Cluster) WaitNewLeader(ctx context.Context, old int) (int, error) {
	if err := c.checkIndex(old); err != nil {
		return -1, err
	}
	return c.waitLeader(ctx, old)
}

func (c *Cluster) waitLeader(ctx context.Context, not int) (int, error) {
	var lead int
	err := c.everyTick(ctx, func() (bool, error) {
		i, err := c.Leader()
		if err == nil && i != not {
			lead = i
			return true, nil
		}
		if err == nil {
			err = fmt.Errorf("%w: member %d still leads", ErrNoLeader, i)
		}
		return false, err
	})
	if err != nil {
		return -1, fmt.Errorf("cluster: wait for leader: %w", err)
	}
	return lead, nil
}

// everyTick calls try at once and then every raft tick until it reports
// done, and returns its error then; if ctx ends first, it returns ctx's
// error with try's last one.
func (c *Cluster) everyTick(ctx context.Context, try func() (done bool, err error)) error {
	tick := time.NewTicker(c.cfg.TickInterval)
	defer tick.Stop()
	for {
		done, err := try()
		if done {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (last: %w)", ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// Close closes every client and FaultPoint the cluster handed out, stops
// every member and removes a temporary data directory. It is idempotent.
// Process members are killed (SIGKILL) and reaped before Close returns.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	clients, faults := c.clients, c.faults
	c.clients, c.faults = nil, nil
	var runs []run
	for _, m := range c.members {
		if m.run != nil {
			runs = append(runs, m.run)
			m.run, m.state = nil, MemberStopped
		}
	}
	c.mu.Unlock()
	for _, cli := range clients {
		_ = cli.Close()
	}
	for _, fp := range faults {
		_ = fp.Close()
	}
	// Stop raft on every member first: a stopping leader otherwise tries to
	// hand leadership to a follower that is stopping too, which costs
	// seconds.
	var wg sync.WaitGroup
	for _, r := range runs {
		wg.Go(r.halt)
	}
	wg.Wait()
	for _, r := range runs {
		wg.Go(r.close)
	}
	wg.Wait()
	c.removeDir()
	return nil
}

func (c *Cluster) removeDir() {
	if c.tempDir {
		_ = os.RemoveAll(c.dir)
	}
}
