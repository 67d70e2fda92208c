//go:build unix && !linux

package chaos

import "syscall"

// sysProcAttr puts a worker in its own process group. Without Pdeathsig, it
// learns of the runner's death from its standard input.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}
