//go:build !unix

package main

import (
	"fmt"
	"os"
)

// A worker stops itself with SIGSTOP and waits for SIGCONT: unix only.
func main() {
	fmt.Fprintln(os.Stderr, "worker: needs a unix system")
	os.Exit(2)
}
