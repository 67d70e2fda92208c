//go:build unix

package childproc

import (
	"os/exec"
	"runtime"
	"syscall"
	"time"
)

// Process is a child started by Start. It never outlives this
// process: on Linux the kernel kills it when the thread that started it
// exits (Pdeathsig, see Start); everywhere, it must exit when its standard
// input ends, a pipe whose write end only this process holds; and Kill
// kills it and its process group.
type Process struct {
	cmd   *exec.Cmd
	pid   int
	exitc chan struct{} // closed once the child is reaped
	err   error         // how it exited; read after exitc is closed
}

// Start starts cmd, whose Stdout and Stderr are set, in its own
// process group (SysProcAttr, keeping only a Credential that cmd has), with
// a standard input pipe that ends when this process dies. exited, if not nil, runs once the child has been
// reaped, before Exited is closed.
//
// The child is started and waited for by a goroutine locked to its OS
// thread, which so stays alive until the child has been reaped: Pdeathsig
// fires when the thread that forked the child exits, not the process.
func Start(cmd *exec.Cmd, exited func()) (*Process, error) {
	p := &Process{cmd: cmd, exitc: make(chan struct{})}
	attr := sysProcAttr()
	if cmd.SysProcAttr != nil {
		attr.Credential = cmd.SysProcAttr.Credential
	}
	cmd.SysProcAttr = attr
	cmd.WaitDelay = time.Second
	if _, err := cmd.StdinPipe(); err != nil {
		return nil, err
	}
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		p.err = cmd.Wait()
		if exited != nil {
			exited()
		}
		close(p.exitc)
	}()
	if err := <-started; err != nil {
		return nil, err
	}
	p.pid = cmd.Process.Pid
	return p, nil
}

// Pid is the child's process ID.
func (p *Process) Pid() int { return p.pid }

// Signal sends sig to the child. os.Process.Signal goes through a pidfd
// where there is one, so it never reaches another process that reused the
// PID.
func (p *Process) Signal(sig syscall.Signal) error { return p.cmd.Process.Signal(sig) }

// Exited is closed once the child has been reaped.
func (p *Process) Exited() <-chan struct{} { return p.exitc }

// Err is how the child exited (cmd.Wait's error). Read it once Exited is
// closed.
func (p *Process) Err() error { return p.err }

// Kill kills the child and its process group, and returns once the child
// has been reaped.
func (p *Process) Kill() {
	select {
	case <-p.exitc:
		return // reaped: its PID may belong to another process by now
	default:
	}
	_ = p.Signal(syscall.SIGKILL)
	_ = syscall.Kill(-p.pid, syscall.SIGKILL) // the child leads its group until it is reaped
	<-p.exitc
}

// Term asks the child to exit gracefully (SIGTERM) and kills it (Kill) if it
// has not exited within grace. It returns once the child has been reaped.
func (p *Process) Term(grace time.Duration) {
	if p.Signal(syscall.SIGTERM) == nil {
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-p.exitc:
			return
		case <-t.C:
		}
	}
	p.Kill()
}
