package childproc

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// Stop stops the child with SIGSTOP and returns once the kernel reports it
// stopped (or gone), so that nothing the child does after Stop returns
// runs before SIGCONT: a signal is only queued when kill returns, and the
// child may run on briefly. The child stays waitable: its reaper still
// sees it exit.
func (p *Process) Stop() error {
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		return err
	}
	var info unix.Siginfo
	for {
		err := unix.Waitid(unix.P_PID, p.pid, &info, unix.WSTOPPED|unix.WEXITED|unix.WNOWAIT, nil)
		if err != syscall.EINTR {
			return err
		}
	}
}
