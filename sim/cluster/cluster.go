package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
)

var (
	// ErrInvalidConfig reports a Config that cannot start a cluster.
	ErrInvalidConfig = errors.New("cluster: invalid config")
	// ErrNoLeader reports that no member currently leads the cluster.
	ErrNoLeader = errors.New("cluster: no leader")
	// ErrMemberStopped reports an operation on a member that is not running.
	ErrMemberStopped = errors.New("cluster: member stopped")
	// ErrClosed reports an operation on a closed Cluster.
	ErrClosed = errors.New("cluster: closed")
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
	// StartTimeout bounds how long Start waits for the members to be ready.
	// Zero means 30s.
	StartTimeout time.Duration
	// Logger receives the members' logs. Nil discards them.
	Logger *zap.Logger
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

// Cluster is a running embedded etcd cluster. Its methods are safe for
// concurrent use.
type Cluster struct {
	cfg     Config
	dir     string
	tempDir bool

	mu      sync.Mutex
	members []*member
	clients []*clientv3.Client
	faults  []*FaultPoint
	closed  bool
}

type member struct {
	name       string
	dir        string
	clientURL  url.URL
	peerURL    url.URL
	initial    string
	etcd       *embed.Etcd // nil while stopped
	everServed bool
}

// Start starts a cluster and waits until every member serves requests and a
// leader is elected.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	c := &Cluster{cfg: cfg, dir: cfg.Dir}
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
		m := &member{
			name:      fmt.Sprintf("m%d", i),
			clientURL: url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[2*i])},
			peerURL:   url.URL{Scheme: "http", Host: fmt.Sprintf("127.0.0.1:%d", ports[2*i+1])},
		}
		m.dir = filepath.Join(c.dir, m.name)
		initial = append(initial, m.name+"="+m.peerURL.String())
		c.members = append(c.members, m)
	}
	for _, m := range c.members {
		m.initial = strings.Join(initial, ",")
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.StartTimeout)
	defer cancel()
	// Launch the members one after another, then wait for them together. A
	// new member first asks its peers whether it is already part of a
	// running cluster; a peer that is listening but not yet serving makes it
	// wait for etcd's 1s bootstrap timeout, while one that is serving (or
	// not listening at all) answers at once.
	errs := make([]error, len(c.members))
	started := make([]*embed.Etcd, len(c.members))
	for i, m := range c.members {
		started[i], errs[i] = c.launch(m)
	}
	var wg sync.WaitGroup
	for i, m := range c.members {
		if started[i] != nil {
			wg.Go(func() { errs[i] = c.ready(ctx, m, started[i]) })
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

// freePorts reserves n distinct free loopback ports. The listeners are
// closed before the ports are used, so another process could take one in
// between; on loopback in a test process that does not happen in practice.
func freePorts(n int) ([]int, error) {
	lns := make([]net.Listener, 0, n)
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("cluster: free port: %w", err)
		}
		lns = append(lns, ln)
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// startMember starts member m and waits until it is ready.
func (c *Cluster) startMember(ctx context.Context, m *member) error {
	e, err := c.launch(m)
	if err != nil {
		return err
	}
	return c.ready(ctx, m, e)
}

// launch starts member m's server without waiting for it to be ready.
func (c *Cluster) launch(m *member) (*embed.Etcd, error) {
	ec := embed.NewConfig()
	ec.Name = m.name
	ec.Dir = m.dir
	ec.ListenClientUrls = []url.URL{m.clientURL}
	ec.AdvertiseClientUrls = []url.URL{m.clientURL}
	ec.ListenPeerUrls = []url.URL{m.peerURL}
	ec.AdvertisePeerUrls = []url.URL{m.peerURL}
	ec.InitialCluster = m.initial
	ec.InitialClusterToken = "tenure-test"
	ec.ClusterState = embed.ClusterStateFlagNew
	ec.TickMs = uint(c.cfg.TickInterval / time.Millisecond)
	ec.ElectionMs = uint(c.cfg.ElectionTimeout / time.Millisecond)
	ec.ListenMetricsUrls = nil
	ec.EnableGRPCGateway = false
	ec.UnsafeNoFsync = true
	ec.ZapLoggerBuilder = embed.NewZapLoggerBuilder(c.cfg.Logger.Named(m.name))
	e, err := embed.StartEtcd(ec)
	if err != nil {
		return nil, fmt.Errorf("cluster: start member %s: %w", m.name, err)
	}
	return e, nil
}

// ready waits until launched member m is ready to serve, and records it.
func (c *Cluster) ready(ctx context.Context, m *member, e *embed.Etcd) error {
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return fmt.Errorf("cluster: member %s failed: %w", m.name, err)
	case <-ctx.Done():
		e.Close()
		return fmt.Errorf("cluster: member %s not ready: %w", m.name, ctx.Err())
	}
	c.mu.Lock()
	m.etcd = e
	m.everServed = true
	c.mu.Unlock()
	return nil
}

// DataDir returns the directory that holds the members' data.
func (c *Cluster) DataDir() string { return c.dir }

// Size returns the number of members, running or stopped.
func (c *Cluster) Size() int { return len(c.members) }

// Endpoints returns the client URLs of all members.
func (c *Cluster) Endpoints() []string {
	eps := make([]string, len(c.members))
	for i, m := range c.members {
		eps[i] = m.clientURL.String()
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

func (c *Cluster) newClient(endpoints []string) (*clientv3.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	cli, err := clientv3.New(ClientConfig(endpoints))
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
		p, err := NewProxy(m.clientURL.Host)
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
// the running members, or ErrNoLeader.
func (c *Cluster) Leader() (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var leaderID uint64
	for _, m := range c.members {
		if m.etcd == nil {
			continue
		}
		if lead := uint64(m.etcd.Server.Leader()); lead != 0 {
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
		if m.etcd != nil && uint64(m.etcd.Server.MemberID()) == leaderID {
			return i, nil
		}
	}
	return -1, fmt.Errorf("%w: leader is not a running member", ErrNoLeader)
}

// WaitLeader waits until the running members agree on a running leader and
// returns its index.
func (c *Cluster) WaitLeader(ctx context.Context) (int, error) {
	tick := time.NewTicker(c.cfg.TickInterval)
	defer tick.Stop()
	for {
		i, err := c.Leader()
		if err == nil {
			return i, nil
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("cluster: wait for leader: %w (last: %v)", ctx.Err(), err)
		case <-tick.C:
		}
	}
}

// StopMember stops member i; its data stays for RestartMember.
func (c *Cluster) StopMember(i int) error {
	c.mu.Lock()
	if i < 0 || i >= len(c.members) {
		c.mu.Unlock()
		return fmt.Errorf("%w: member %d of %d", ErrInvalidConfig, i, len(c.members))
	}
	m := c.members[i]
	e := m.etcd
	m.etcd = nil
	c.mu.Unlock()
	if e == nil {
		return fmt.Errorf("%w: %s", ErrMemberStopped, m.name)
	}
	e.Close()
	return nil
}

// RestartMember starts stopped member i again from its data directory and
// waits until it serves requests.
func (c *Cluster) RestartMember(ctx context.Context, i int) error {
	c.mu.Lock()
	if i < 0 || i >= len(c.members) {
		c.mu.Unlock()
		return fmt.Errorf("%w: member %d of %d", ErrInvalidConfig, i, len(c.members))
	}
	m := c.members[i]
	running, closed := m.etcd != nil, c.closed
	c.mu.Unlock()
	if closed {
		return ErrClosed
	}
	if running {
		return fmt.Errorf("cluster: member %s is running", m.name)
	}
	ctx, cancel := context.WithTimeout(ctx, c.cfg.StartTimeout)
	defer cancel()
	return c.startMember(ctx, m)
}

// StopLeader stops the member that leads the cluster and returns its index.
// The others elect a new leader (with 3 members).
func (c *Cluster) StopLeader(ctx context.Context) (int, error) {
	i, err := c.WaitLeader(ctx)
	if err != nil {
		return -1, err
	}
	return i, c.StopMember(i)
}

// Running reports whether member i is running.
func (c *Cluster) Running(i int) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return i >= 0 && i < len(c.members) && c.members[i].etcd != nil
}

// Close closes every client and FaultPoint the cluster handed out, stops
// every member and removes a temporary data directory. It is idempotent.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	clients, faults := c.clients, c.faults
	c.clients, c.faults = nil, nil
	var running []*embed.Etcd
	for _, m := range c.members {
		if m.etcd != nil {
			running = append(running, m.etcd)
			m.etcd = nil
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
	for _, e := range running {
		wg.Go(e.Server.HardStop)
	}
	wg.Wait()
	for _, e := range running {
		wg.Go(e.Close)
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
