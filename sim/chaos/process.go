//go:build unix

package chaos

import (
	"fmt"
	"io"
	"os/exec"
	"syscall"
	"time"

	"github.com/tenure-go/tenure/internal/childproc"
)

// process is one run of a worker in a child process.
//
// The child never outlives the runner: on Linux the kernel kills it when
// the thread that started it exits (Pdeathsig), and that thread stays locked
// to the goroutine that waits for the child; everywhere, the child exits
// when its standard input, a pipe whose write end only the runner holds,
// ends; and kill kills it and its process group.
type process struct {
	cmd   *exec.Cmd
	pid   int
	exitc chan struct{} // closed once the child is reaped
	err   error         // how it exited; read after exitc is closed
	stdin io.Closer
}

// startProcess runs bin with args; line receives every line of its
// standard output, from one goroutine; stderr receives its standard error.
func startProcess(bin string, args []string, line func([]byte), stderr io.Writer) (*process, error) {
	p := &process{exitc: make(chan struct{})}
	cmd := exec.Command(bin, args...)
	cmd.Stdout = &childproc.LineWriter{Line: line}
	cmd.Stderr = stderr
	cmd.SysProcAttr = childproc.SysProcAttr()
	cmd.WaitDelay = time.Second
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	p.cmd, p.stdin = cmd, in
	if err := childproc.Start(cmd, func(err error) { p.err = err; close(p.exitc) }); err != nil {
		return nil, fmt.Errorf("chaos: start worker: %w", err)
	}
	p.pid = cmd.Process.Pid
	return p, nil
}

func (p *process) signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

func (p *process) stop() error { return p.signal(syscall.SIGSTOP) }
func (p *process) cont() error { return p.signal(syscall.SIGCONT) }

// kill kills the child and its process group and waits until it is reaped.
func (p *process) kill() {
	select {
	case <-p.exitc:
		return // reaped: its PID may belong to another process by now
	default:
	}
	_ = p.signal(syscall.SIGKILL)
	_ = syscall.Kill(-p.pid, syscall.SIGKILL) // the child leads its group until it is reaped
	<-p.exitc
}

// term asks the child to leave gracefully (SIGTERM) and kills it if it has
// not exited within grace.
func (p *process) term(grace time.Duration) {
	select {
	case <-p.exitc:
		return
	default:
	}
	_ = p.signal(syscall.SIGCONT)
	if p.signal(syscall.SIGTERM) == nil {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-p.exitc:
			return
		case <-t.C:
		}
	}
	p.kill()
}

func (p *process) exited() <-chan struct{} { return p.exitc }

// workerLogTail is how much of a worker's standard error its exit is
// reported with.
const workerLogTail = 4 << 10
