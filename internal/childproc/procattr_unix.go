//go:build unix && !linux

package childproc

import "syscall"

// SysProcAttr puts a child in its own process group. Without Pdeathsig, the
// child must learn of its parent's death from its standard input.
func SysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
