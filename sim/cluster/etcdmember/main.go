// Command etcdmember runs one etcd member of a sim/cluster Cluster in its own
// process, so that a test can freeze it (SIGSTOP), thaw it (SIGCONT) and kill
// it (SIGKILL) the way a machine or a process fails, without the leadership
// transfer of a graceful stop.
//
// The parent passes the member's settings as flags (see
// sim/cluster/internal/memberspec) and reads the member's reports on standard
// output: "started <id>" once it serves its peers, "ready <id>" once it
// serves requests, then "leader <id>" whenever its view of the raft leader
// changes. Logs go to standard error.
//
// SIGTERM and SIGINT stop the member gracefully (embed's Close, which hands
// leadership to another member first). With -exit-on-stdin-eof the member
// exits at once when its standard input ends, which happens when the parent
// dies, whatever the operating system.
package main

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"

	"github.com/tenure-go/tenure/sim/cluster/internal/memberspec"
)

func main() { os.Exit(run(os.Args[1:])) }

func run(args []string) int {
	spec, flags, err := memberspec.Parse(args)
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdmember:", err)
		return 2
	}
	if flags.ExitOnStdinEOF {
		go func() {
			_, _ = io.Copy(io.Discard, os.Stdin)
			fmt.Fprintln(os.Stderr, "etcdmember: standard input closed: the parent is gone")
			os.Exit(3)
		}()
	}
	lg, err := logger(flags.LogLevel)
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdmember:", err)
		return 2
	}
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)

	e, err := embed.StartEtcd(spec.EmbedConfig(lg))
	if err != nil {
		fmt.Fprintln(os.Stderr, "etcdmember: start:", err)
		return 1
	}
	// StartEtcd returns once the member serves its peers: the parent can
	// start the next member, which then finds this one answering.
	report(memberspec.LineStarted, uint64(e.Server.MemberID()))
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		fmt.Fprintln(os.Stderr, "etcdmember: failed before ready:", err)
		e.Close()
		return 1
	case <-stop:
		e.Close()
		return 0
	}
	report(memberspec.LineReady, uint64(e.Server.MemberID()))
	go reportLeader(e, spec.Tick)
	select {
	case <-stop:
		e.Close()
		return 0
	case err := <-e.Err():
		fmt.Fprintln(os.Stderr, "etcdmember: failed:", err)
		e.Close()
		return 1
	}
}

// reportLeader reports the leader as this member sees it, at once and then
// whenever it changes, checking every raft tick and on every change etcd
// signals.
func reportLeader(e *embed.Etcd, tick time.Duration) {
	t := time.NewTicker(tick)
	defer t.Stop()
	last := ^uint64(0)
	for {
		changed := e.Server.LeaderChangedNotify()
		if lead := uint64(e.Server.Leader()); lead != last {
			report(memberspec.LineLeader, lead)
			last = lead
		}
		select {
		case <-changed:
		case <-t.C:
		case <-e.Server.StopNotify():
			return
		}
	}
}

func report(kind string, id uint64) {
	// An unwritable standard output means the parent is gone.
	if _, err := fmt.Fprintln(os.Stdout, memberspec.Line(kind, id)); err != nil {
		os.Exit(3)
	}
}

func logger(level string) (*zap.Logger, error) {
	if level == "" {
		return zap.NewNop(), nil
	}
	lvl, err := zap.ParseAtomicLevel(level)
	if err != nil {
		return nil, fmt.Errorf("-log-level: %w", err)
	}
	cfg := zap.NewProductionConfig()
	cfg.Level = lvl
	cfg.OutputPaths = []string{"stderr"}
	cfg.ErrorOutputPaths = []string{"stderr"}
	cfg.Sampling = nil
	return cfg.Build()
}
