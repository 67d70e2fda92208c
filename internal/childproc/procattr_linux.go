package childproc

import "syscall"

// sysProcAttr puts a child in its own process group and has the kernel
// kill it when the thread that started it exits (see Start).
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
