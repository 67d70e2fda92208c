// Command quickstart starts an embedded 3-member etcd cluster on loopback and
// reports its status. It needs no set-up: go run ./examples/quickstart
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/tenure-go/tenure/sim/cluster"
)

func main() {
	if err := run(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context) error {
	start := time.Now()
	cfg := cluster.DefaultConfig()
	cfg.Members = 3
	c, err := cluster.Start(ctx, cfg)
	if err != nil {
		return err
	}
	defer c.Close()
	leader, err := c.WaitLeader(ctx)
	if err != nil {
		return err
	}
	fmt.Printf("etcd: %d members up in %v, leader m%d, endpoints %v\n", c.Size(), time.Since(start).Round(time.Millisecond), leader, c.Endpoints())
	return nil
}
