package chaos

import "syscall"

// sysProcAttr puts a worker in its own process group and has the kernel
// kill it when the thread that started it exits.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
