// Command tenurectl is the operator's CLI of a tenure fleet: it shows the
// fleet's spec, members, partitions, leaders and health, and takes the
// audited operator actions (force release, drain, undrain, pin, unpin,
// suspending and resuming the balancer, resizing the partition count,
// changing the ring algorithm) through fleet.Operator, plans a dry run of
// the balancer's next pass and of a resize, against a real etcd, and
// checks what a restore of etcd from a snapshot needs (rewind-check).
//
// Usage:
//
//	tenurectl [global flags] COMMAND [flags] [args]
//
// Run tenurectl -h for the commands and flags. Global flags may also follow
// the command. The password is never logged or echoed; it may come from
// $TENURECTL_PASSWORD instead of --password.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/user"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenure-go/tenure/internal/etcderr"
	"github.com/tenure-go/tenure/ownership/fleet"
)

const usage = `tenurectl: see and steer a tenure fleet

Usage:
  tenurectl [global flags] COMMAND [flags] [args]

Commands:
  fleets                            the fleets under /tenure/: cluster name, partitions
  spec                              the fleet's spec (partitions, load factor, ring algorithm),
                                    the protocol features it records in use, and the fleet's
                                    effective features (those every member's build understands)
  spec algorithm weighted|bounded --reason R [--actor A] [--budget B] [--dry-run]
                                    move the fleet to another ring algorithm while it serves:
                                    steps of at most B planned moves (default 1% of the
                                    partitions), then the spec's algorithm changes, moving
                                    nothing; audited; bounded by --timeout, and resumed by
                                    running it again; --dry-run prints the moves and steps
  spec algorithm status             the migration that runs: target, moves left, placed
  spec algorithm abort --reason R [--actor A]
                                    end it: the partitions it moved go back (planned moves)
  spec resize --partitions N --reason R [--budget B] [--dry-run] [--actor A]
                                    change the partition count while the fleet serves: N is
                                    the count times or divided by a power of two; groups move
                                    as planned moves, at most B (default 8) at once; logs each
                                    step on stderr and returns once the spec records N (give
                                    a --timeout long enough; stopped, run it again to resume);
                                    --dry-run: the groups, partition moves and steps, unchanged
  spec resize status                the resize in progress: counts, groups done, moving, fenced
  spec resize abort --reason R [--dry-run] [--actor A]
                                    return the resize in progress to the count it started
                                    from: its done groups move back the same way; audited,
                                    logged, resumed like the resize
  members                           members: address, lease, TTL left, drained, partitions held,
                                    build and protocol features
  partitions [--node N]             every partition's owner, epoch, acquire time and ring owner
  owner-of KEY                      the partition, owner and epoch of KEY
  leaders [--prefix P]              each election's leader, epoch and candidates; P is the
                                    elections' key prefix (default <fleet prefix>leader/), so
                                    the fleet's --prefix goes before the command here
  status                            unowned partitions, handoffs, per-node counts, idle members, etcd alarms
  force-release partition P --reason R [--actor A] [--epoch E]
  force-release leader NAME --reason R [--actor A] [--epoch E]
                                    delete the claim (or leader key) held at its current epoch
                                    (or at E), and record it in the audit log
  drain NODE --reason R [--actor A] the ring excludes NODE; its partitions move away
  undrain NODE [--reason R] [--actor A]
  pin P NODE --reason R [--actor A] place partition P on NODE (while NODE is a member and
                                    not drained; the ring decides otherwise); a planned move
  unpin P --reason R [--actor A]    the ring decides partition P again
  placement                         the ring algorithm; each member's weight, partitions,
                                    partitions per weight, capacity, load (units of work per
                                    second, smoothed: an EWMA over the window of the member's
                                    load reports), load per weight; the imbalances; the
                                    balancer's suspension and last pass; the pins and moves
  balance suspend --reason R [--actor A]
  balance resume --reason R [--actor A]
                                    the balancer (whichever node runs it) plans and reports
                                    but moves nothing while suspended; audited
  balance plan [--upper U] [--lower L] [--budget B] [--cooldown D]
                                    dry run: the moves the next pass would make, planned by
                                    balance.Plan from what etcd holds, with the configuration
                                    of the last pass (else the defaults) unless given
  audit [--since D]                 operator actions of the last D (default: all)
  rewind-check --db DB [--table T] [--revision R] [--margin M]
                                    before restoring etcd from a snapshot: the highest floor of
                                    sqlfence's table T (default tenure_fences) in DB (sqlite:PATH
                                    or a postgres:// URL), etcd's revision (or R, the snapshot's:
                                    etcdutl snapshot status), and the --bump-revision the restore
                                    needs: floor - revision + M (default 1000000000)

Global flags (before or after the command):
  --endpoints LIST   etcd endpoints, comma-separated (default 127.0.0.1:2379)
  --cacert FILE      CA bundle to verify etcd's certificate (enables TLS)
  --cert FILE        client certificate (with --key; enables TLS)
  --key FILE         client key
  --user NAME        etcd user
  --password PW      etcd password ($TENURECTL_PASSWORD if unset); never echoed
  --timeout D        bound of the whole command, connecting included (default 5s)
  --cluster NAME     the fleet's cluster name: keys under /tenure/NAME/; without it (or
                     --prefix), a fleet command lists the fleets it finds and exits 2
  --prefix P         the fleet's key prefix, instead of --cluster's
  --json             print JSON instead of text: one vocabulary in every command
                     (snake_case keys; revisions as "revision" or "<what>_revision";
                     durations as seconds in keys ending _seconds; times in RFC 3339;
                     empty lists as []; the ring algorithm by name)

--actor defaults to $USER@hostname. Exit status: 0 done, 1 failed (etcd
unreachable within --timeout, action refused), 2 bad usage (missing
--reason, unknown command).
`

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

// globals are the flags every command takes.
type globals struct {
	endpoints, cacert, cert, key string
	user, password               string
	timeout                      time.Duration
	cluster, prefix              string
	json                         bool

	stderr io.Writer // where spec resize logs its steps
}

// register defines the global flags on fs, except those a command has
// defined itself.
func (g *globals) register(fs *flag.FlagSet) {
	str := func(p *string, name, help string) {
		if fs.Lookup(name) == nil {
			fs.StringVar(p, name, *p, help)
		}
	}
	str(&g.endpoints, "endpoints", "etcd endpoints, comma-separated")
	str(&g.cacert, "cacert", "CA bundle of etcd's certificate")
	str(&g.cert, "cert", "client certificate")
	str(&g.key, "key", "client key")
	str(&g.user, "user", "etcd user")
	str(&g.password, "password", "etcd password (never echoed)")
	str(&g.cluster, "cluster", "cluster name")
	str(&g.prefix, "prefix", "key prefix instead of the cluster's")
	fs.DurationVar(&g.timeout, "timeout", g.timeout, "bound of the whole command")
	fs.BoolVar(&g.json, "json", g.json, "print JSON")
}

// usageError is a command line the CLI refuses: exit status 2.
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// run runs the command line args and returns the exit status.
func run(args []string, stdout, stderr io.Writer) int {
	g := &globals{endpoints: "127.0.0.1:2379", timeout: 5 * time.Second, stderr: stderr}
	top := flag.NewFlagSet("tenurectl", flag.ContinueOnError)
	top.SetOutput(io.Discard)
	g.register(top)
	if err := top.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stdout, usage)
			return 0
		}
		fmt.Fprintf(stderr, "tenurectl: %v\n\n%s", err, usage)
		return 2
	}
	if top.NArg() == 0 {
		fmt.Fprintf(stderr, "tenurectl: no command\n\n%s", usage)
		return 2
	}
	cmd, ok := commands[top.Arg(0)]
	if !ok {
		fmt.Fprintf(stderr, "tenurectl: unknown command %q\n\n%s", top.Arg(0), usage)
		return 2
	}
	err := cmd(g, top.Args()[1:], stdout)
	var ue usageError
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		fmt.Fprint(stdout, usage)
		return 0
	case errors.As(err, &ue):
		fmt.Fprintf(stderr, "tenurectl %s: %v\n", top.Arg(0), err)
		return 2
	default:
		fmt.Fprintf(stderr, "tenurectl %s: %v\n", top.Arg(0), err)
		return 1
	}
}

// parse parses a command's flags (the globals and its own), which may come
// before, between and after its positional arguments, and returns the
// positional arguments.
func parse(fs *flag.FlagSet, g *globals, args []string) ([]string, error) {
	fs.SetOutput(io.Discard)
	g.register(fs)
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, usageError{err.Error()}
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, nil
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// defaultActor returns $USER@hostname.
func defaultActor() string {
	name := os.Getenv("USER")
	if name == "" {
		if u, err := user.Current(); err == nil {
			name = u.Username
		}
	}
	if name == "" {
		name = "unknown"
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	return name + "@" + host
}

// session is an etcd connection and an Operator bounded by --timeout.
type session struct {
	ctx    context.Context
	cancel context.CancelFunc
	cli    *clientv3.Client
	op     *fleet.Operator // nil for commands that need no fleet
	g      *globals
	diag   time.Duration // kept from --timeout to say why etcd did not answer
}

// dial opens the etcd client; the returned session's context ends before
// --timeout, leaving time to diagnose an etcd that did not answer (see
// wrap).
func dial(g *globals) (*session, error) {
	if g.timeout <= 0 {
		return nil, usagef("--timeout %v must be positive", g.timeout)
	}
	cfg := clientv3.Config{
		Endpoints:   splitList(g.endpoints),
		DialTimeout: g.timeout,
		Username:    g.user,
		Password:    g.password,
		Logger:      zap.NewNop(),
	}
	if cfg.Password == "" {
		cfg.Password = os.Getenv("TENURECTL_PASSWORD")
	}
	if len(cfg.Endpoints) == 0 {
		return nil, usagef("--endpoints is empty")
	}
	if g.cacert != "" || g.cert != "" || g.key != "" {
		tc, err := tlsConfig(g)
		if err != nil {
			return nil, err
		}
		cfg.TLS = tc
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to etcd at %s: %w", strings.Join(cfg.Endpoints, ","), err)
	}
	diag := min(g.timeout/5, time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), g.timeout-diag)
	return &session{ctx: ctx, cancel: cancel, cli: cli, g: g, diag: diag}, nil
}

// connect opens the etcd client and the Operator of the fleet --cluster
// or --prefix names. Without either, it lists the fleets it finds and
// returns a usage error that names them.
func connect(g *globals) (*session, error) {
	s, err := dial(g)
	if err != nil {
		return nil, err
	}
	if g.cluster == "" && g.prefix == "" {
		err := noFleet(s)
		s.close()
		return nil, err
	}
	s.op, err = fleet.NewOperator(s.cli, fleet.OperatorConfig{Cluster: g.cluster, Prefix: g.prefix})
	if err != nil {
		s.close()
		return nil, err
	}
	return s, nil
}

// close ends the session.
func (s *session) close() {
	s.cancel()
	_ = s.cli.Close()
}

// wrap turns an error of an etcd call into the CLI's message: when etcd did
// not answer in time, one that names the endpoints, the timeout and the
// likely cause (a refused connection, an endpoint that accepts connections
// but does not answer), as ownership.Join reports it.
func (s *session) wrap(err error) error {
	if err == nil {
		return nil
	}
	if s.ctx.Err() != nil {
		return fmt.Errorf("etcd at %s did not answer within %v (--timeout): %w; cause: %v",
			s.g.endpoints, s.g.timeout, err, etcderr.Diagnose(s.cli, s.diag))
	}
	return err
}

func splitList(s string) []string {
	var out []string
	for _, e := range strings.Split(s, ",") {
		if e = strings.TrimSpace(e); e != "" {
			out = append(out, e)
		}
	}
	return out
}

// tlsConfig builds the client's TLS configuration from --cacert, --cert and
// --key.
func tlsConfig(g *globals) (*tls.Config, error) {
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if (g.cert == "") != (g.key == "") {
		return nil, usagef("--cert and --key go together")
	}
	if g.cert != "" {
		pair, err := tls.LoadX509KeyPair(g.cert, g.key)
		if err != nil {
			return nil, fmt.Errorf("load client certificate: %w", err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	if g.cacert != "" {
		pem, err := os.ReadFile(g.cacert)
		if err != nil {
			return nil, fmt.Errorf("read CA bundle: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("no certificate in CA bundle %s", g.cacert)
		}
		tc.RootCAs = pool
	}
	return tc, nil
}
