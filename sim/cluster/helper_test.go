package cluster_test

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/tenure-go/tenure/sim/cluster"
)

// helperEnv makes the test binary run helperMain instead of the tests.
const helperEnv = "TENURE_CLUSTER_TEST_HELPER"

// helperMain starts a cluster of 3 process members, prints their PIDs and
// waits to be killed. It runs in a child of the test process.
func helperMain() {
	cfg := cluster.DefaultConfig()
	cfg.Members = 3
	cfg.Processes = true
	c, err := cluster.Start(context.Background(), cfg)
	if err != nil {
		fmt.Println("error", err)
		os.Exit(1)
	}
	var pids []string
	for i := range c.Size() {
		pid, err := c.PID(i)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		pids = append(pids, strconv.Itoa(pid))
	}
	fmt.Println("pids", strings.Join(pids, " "))
	select {}
}
