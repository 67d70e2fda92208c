package etcderr

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
)

// FirstCall describes the first etcd call of a component (a Join, a
// client's first read) for Reach.
type FirstCall struct {
	// What names the call in warnings and in the error ("join n1").
	What string
	// Log receives a warning after every unanswered attempt.
	Log hclog.Logger
	// Client is the etcd client, used only to diagnose (see Diagnose).
	Client any
	// Unavailable is the caller's sentinel that the error wraps when ctx
	// ends before etcd answered.
	Unavailable error
}

// reachAttempt bounds each attempt of a FirstCall, after which Reach logs
// that etcd does not answer, and why, and tries again.
const reachAttempt = time.Second

// Reach runs op, the first etcd call of a component, in attempts of at
// most a second each, until it succeeds, fails with an answer from etcd,
// or ctx ends. Attempts are measured on the system clock, like the network
// waits they bound. The etcd client waits for a connection as long as a
// call's context lasts and says nothing meanwhile; Reach logs a warning
// with the likely cause after every unanswered attempt (the cause from
// Diagnose), and when ctx ends returns an error that wraps
// call.Unavailable and ctx's error and names the last cause. op must be
// safe to repeat.
func Reach(ctx context.Context, call FirstCall, op func(context.Context) error) error {
	start := time.Now()
	for n := 1; ; n++ {
		actx, cancel := context.WithTimeout(ctx, reachAttempt)
		err := op(actx)
		timedOut := actx.Err() != nil
		cancel()
		if err == nil || !timedOut {
			return err
		}
		cause := Diagnose(call.Client, reachAttempt)
		waited := time.Since(start).Round(time.Millisecond)
		if ctx.Err() != nil {
			return fmt.Errorf("%w: %s: gave up after %v: %w; last cause: %v",
				call.Unavailable, call.What, waited, context.Cause(ctx), cause)
		}
		call.Log.Warn("etcd does not answer; still trying", "op", call.What, "attempt", n, "waited", waited, "cause", cause)
	}
}

// Diagnose tells why an etcd client's calls go unanswered, as far as a
// plain TCP dial to each of its endpoints can: "connection refused" and the
// like, or that the endpoints accept connections but etcd does not answer
// (no leader, a TLS or auth mismatch, an overloaded server). cli must have
// an Endpoints() []string method (a *clientv3.Client has); otherwise only
// the silence is reported.
func Diagnose(cli any, timeout time.Duration) error {
	c, ok := cli.(interface{ Endpoints() []string })
	if !ok {
		return errors.New("etcd did not answer")
	}
	eps := c.Endpoints()
	if len(eps) == 0 {
		return errors.New("the etcd client has no endpoints")
	}
	var errs []error
	for _, ep := range eps {
		network, addr := endpointAddr(ep)
		conn, err := net.DialTimeout(network, addr, timeout)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		_ = conn.Close()
		return fmt.Errorf("etcd at %s accepts connections but did not answer (no leader, TLS or auth mismatch, or overloaded)", ep)
	}
	return errors.Join(errs...)
}

// endpointAddr returns the network and address of an etcd endpoint
// ("host:port", "http://host:port", "unix:///path").
func endpointAddr(ep string) (string, string) {
	if u, err := url.Parse(ep); err == nil && u.Scheme != "" && u.Host != "" {
		return "tcp", u.Host
	}
	if p, ok := strings.CutPrefix(ep, "unix://"); ok {
		return "unix", p
	}
	if p, ok := strings.CutPrefix(ep, "unix:"); ok {
		return "unix", p
	}
	return "tcp", ep
}
