//go:build unix && !linux

package cluster

import "syscall"

// sysProcAttr puts a member process in its own process group. Without
// Pdeathsig, the child learns of this process's death from its standard
// input.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
