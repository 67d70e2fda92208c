//go:build unix

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/tenure-go/tenure/internal/childproc"
	"github.com/tenure-go/tenure/sim/cluster/internal/memberspec"
)

const (
	sigStop = syscall.SIGSTOP
	sigCont = syscall.SIGCONT
)

// process is a run of a member in a child process (the etcdmember command,
// run with -exit-on-stdin-eof; see childproc.Process: it never outlives this
// process, and halt kills its process group).
type process struct {
	*childproc.Process
	name   string
	startc chan struct{} // closed when the child reports started
	readyc chan struct{} // closed when the child reports ready

	startOnce sync.Once
	readyOnce sync.Once
	id        atomic.Uint64
	lead      atomic.Uint64
	stdout    childproc.LineWriter
	stderr    logWriter
}

// startProcess starts member s in a child process running command (the
// etcdmember binary, or a command that runs it) with s's flags. onExit runs
// once the child has exited and been reaped.
func startProcess(command []string, s memberspec.Spec, lg *zap.Logger, onExit func(*process)) (*process, error) {
	p := &process{
		name:   s.Name,
		startc: make(chan struct{}),
		readyc: make(chan struct{}),
		stderr: logWriter{lg: lg},
	}
	p.stdout.Line = p.report
	p.stderr.lw.Line = p.stderr.log
	p.stderr.last.W, p.stderr.last.Size = &p.stderr.lw, tailSize
	flags := memberspec.Flags{LogLevel: childLevel(lg), ExitOnStdinEOF: true}
	cmd := exec.Command(command[0], append(slices.Clip(command[1:]), memberspec.Args(s, flags)...)...)
	cmd.Stdout = &p.stdout
	cmd.Stderr = &p.stderr
	child, err := childproc.Start(cmd, func() { onExit(p) })
	if err != nil {
		return nil, err
	}
	p.Process = child
	return p, nil
}

// report handles one line of the child's standard output.
func (p *process) report(line []byte) {
	kind, id, err := memberspec.ParseLine(string(line))
	if err != nil {
		p.stderr.lg.Warn("unknown report from member process", zap.ByteString("line", line))
		return
	}
	switch kind {
	case memberspec.LineStarted:
		p.startOnce.Do(func() { close(p.startc) })
	case memberspec.LineReady:
		p.id.Store(id)
		p.readyOnce.Do(func() { close(p.readyc) })
	case memberspec.LineLeader:
		p.lead.Store(id)
	}
}

// waitStarted waits until the child serves its peers.
func (p *process) waitStarted(ctx context.Context) error {
	select {
	case <-p.startc:
		return nil
	case <-p.Exited():
		return p.exitError()
	case <-ctx.Done():
		return fmt.Errorf("not started: %w", ctx.Err())
	}
}

func (p *process) wait(ctx context.Context) (uint64, error) {
	select {
	case <-p.readyc:
		return p.id.Load(), nil
	case <-p.Exited():
		return 0, p.exitError()
	case <-ctx.Done():
		return 0, fmt.Errorf("not ready: %w", ctx.Err())
	}
}

func (p *process) leader() uint64 { return p.lead.Load() }

// halt kills the child and its process group, and waits until it is
// reaped.
func (p *process) halt() { p.Kill() }

// close waits until the child is reaped.
func (p *process) close() { <-p.Exited() }

// stop asks the child to stop gracefully (SIGTERM: etcd's Close), and kills
// it if it has not exited after stopGrace.
func (p *process) stop() { p.Term(stopGrace) }

// exitError describes how the child exited, with the end of its standard
// error. Call it once the child has exited.
func (p *process) exitError() error {
	tail := p.stderr.tail()
	if len(tail) > 0 {
		return fmt.Errorf("%w: process exited (%v): %s", ErrMemberStopped, p.Err(), tail)
	}
	return fmt.Errorf("%w: process exited (%v)", ErrMemberStopped, p.Err())
}

// childLevel returns the lowest level lg logs, for the child's -log-level.
// It is never above error, so that the child's errors reach the end of its
// standard error, which a failure reports.
func childLevel(lg *zap.Logger) string {
	for _, l := range []zapcore.Level{zapcore.DebugLevel, zapcore.InfoLevel, zapcore.WarnLevel} {
		if lg.Core().Enabled(l) {
			return l.String()
		}
	}
	return zapcore.ErrorLevel.String()
}

// logWriter takes a child's standard error: it keeps the end for error
// messages and passes each line (etcd's JSON logs) on to lg.
type logWriter struct {
	lg   *zap.Logger
	lw   childproc.LineWriter
	last childproc.Tail // writes on to lw
}

// tailSize is how much of a child's standard error its exit error quotes.
const tailSize = 2 << 10

func (w *logWriter) Write(b []byte) (int, error) { return w.last.Write(b) }

func (w *logWriter) tail() string { return w.last.String() }

// log passes one line of the child's standard error on to lg, at its level
// (never above error: a child's fatal log must not end this process).
func (w *logWriter) log(line []byte) {
	var rec map[string]any
	if json.Unmarshal(line, &rec) != nil {
		w.lg.Warn(string(line))
		return
	}
	lvl := zapcore.InfoLevel
	if s, ok := rec["level"].(string); ok {
		if l, err := zapcore.ParseLevel(s); err == nil {
			lvl = min(l, zapcore.ErrorLevel)
		}
	}
	msg, _ := rec["msg"].(string)
	ce := w.lg.Check(lvl, msg)
	if ce == nil {
		return
	}
	delete(rec, "level")
	delete(rec, "msg")
	delete(rec, "ts")
	keys := make([]string, 0, len(rec))
	for k := range rec {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	fields := make([]zap.Field, 0, len(keys))
	for _, k := range keys {
		fields = append(fields, zap.Any(k, rec[k]))
	}
	ce.Write(fields...)
}
