package router_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/tenure-go/tenure/fence"
	"github.com/tenure-go/tenure/fence/httpfence"
	"github.com/tenure-go/tenure/ownership"
	"github.com/tenure-go/tenure/router"
	"github.com/tenure-go/tenure/sim/cluster"
)

// Example runs one node on an embedded etcd and sends work for a key to it
// in process, over HTTP through the node's handler, and from a Client
// outside the fleet.
func Example() {
	ctx := context.Background()
	etcd, err := cluster.Start(ctx, cluster.DefaultConfig())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer etcd.Close()
	cli, err := etcd.Client()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer cli.Close()

	// A node listens first, then joins with its address.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg := ownership.DefaultConfig()
	cfg.Cluster, cfg.NodeID, cfg.Addr = "example", "node-1", ln.Addr().String()
	cfg.Ring.Partitions = 16
	node, err := ownership.Join(ctx, cli, cfg)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer node.Close(ctx)
	r, err := router.New(node, router.DefaultConfig())
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Close()

	// In process. Right after Join the node is still claiming its
	// partitions: Do waits for that instead of failing.
	err = r.Do(ctx, "user-42", func(ctx context.Context, t fence.Token) error {
		fmt.Println("in process under", t.Scope)
		return nil
	})
	if err != nil {
		fmt.Println(err)
		return
	}

	// Over HTTP: the handler serves the keys this node owns and forwards
	// the others to their owners.
	users := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		t, _ := fence.FromContext(req.Context())
		fmt.Fprintf(w, "%s served under %s", req.PathValue("id"), t.Scope)
	})
	h, err := r.Handler(router.KeyFromPathValue("id"), users)
	if err != nil {
		fmt.Println(err)
		return
	}
	mux := http.NewServeMux()
	mux.Handle("/users/{id}", h)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go srv.Serve(ln)
	defer srv.Close()

	// From outside the fleet: straight to the owner.
	c, err := router.NewClient(ctx, cli, router.ClientConfig{Cluster: "example"})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://tenure/users/user-42", nil) // Do sets the owner's host
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := c.Do(ctx, "user-42", req)
	if err != nil {
		fmt.Println(err)
		return
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Println(resp.StatusCode, string(body))
	// Output:
	// in process under p/1
	// 200 user-42 served under p/1
}

func ExampleBackoff_Delay() {
	b := router.Backoff{Initial: 10 * time.Millisecond, Max: 50 * time.Millisecond, Jitter: 0.5}
	for retry := 1; retry <= 4; retry++ {
		// The longest and the shortest delay before each retry.
		fmt.Println(retry, b.Delay(retry, 0), b.Delay(retry, 1))
	}
	// Output:
	// 1 10ms 5ms
	// 2 20ms 10ms
	// 3 40ms 20ms
	// 4 50ms 25ms
}

// ExampleWriteError shows a local handler answering the failure of its
// fenced write: a write refused as stale, or work cut short because the
// partition moved, becomes a retryable refusal that Client sends again to
// the new owner.
func ExampleWriteError() {
	save := func(w http.ResponseWriter, r *http.Request, err error) {
		if err != nil {
			if !router.WriteError(w, r, err) {
				http.Error(w, err.Error(), http.StatusInternalServerError)
			}
			return
		}
		io.WriteString(w, "saved")
	}
	for _, err := range []error{
		fmt.Errorf("save: %w", &fence.StaleError{Scope: "p/3", Presented: 7, Current: 9}),
		fmt.Errorf("save: %w", ownership.ErrMoved),
		errors.New("disk full"),
	} {
		rec := httptest.NewRecorder()
		save(rec, httptest.NewRequest(http.MethodPost, "/k/x", nil), err)
		ref, _ := httpfence.ReadRefusal(rec.Result())
		if ref == nil {
			fmt.Println(rec.Code, "not a refusal")
			continue
		}
		fmt.Println(rec.Code, ref.Kind, "retryable:", ref.Retryable())
	}
	// Output:
	// 409 stale retryable: true
	// 503 handoff retryable: true
	// 500 not a refusal
}
