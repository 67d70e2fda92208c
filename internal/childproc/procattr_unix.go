//go:build unix && !linux

package childproc

import "syscall"

// sysProcAttr puts a child in its own process group. Without Pdeathsig, the
// child must learn of its parent's death from its standard input.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
