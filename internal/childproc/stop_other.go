//go:build unix && !linux

package childproc

import "syscall"

// Stop stops the child with SIGSTOP. Where waitid cannot tell, it returns
// once the signal is queued.
func (p *Process) Stop() error { return p.Signal(syscall.SIGSTOP) }
