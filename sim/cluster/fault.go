package cluster

import (
	"errors"
	"time"
)

// FaultPoint sits between one client and the cluster: one Proxy in front of
// each member. Its faults apply to every member at once, so a blackhole cuts
// the client off from the whole cluster while other clients keep working.
// A FaultPoint is safe for concurrent use.
type FaultPoint struct {
	proxies []*Proxy
}

// Endpoints returns the proxies' URLs, for a client's configuration.
func (f *FaultPoint) Endpoints() []string {
	eps := make([]string, len(f.proxies))
	for i, p := range f.proxies {
		eps[i] = "http://" + p.Addr()
	}
	return eps
}

// Proxies returns the proxies, one per member in member order.
func (f *FaultPoint) Proxies() []*Proxy { return f.proxies }

// Blackhole stops all traffic between the client and the cluster.
func (f *FaultPoint) Blackhole() {
	for _, p := range f.proxies {
		p.Blackhole()
	}
}

// Heal ends a blackhole.
func (f *FaultPoint) Heal() {
	for _, p := range f.proxies {
		p.Heal()
	}
}

// SetLatency delays traffic by d in each direction.
func (f *FaultPoint) SetLatency(d time.Duration) {
	for _, p := range f.proxies {
		p.SetLatency(d)
	}
}

// DropConnections closes every open connection; the client reconnects.
func (f *FaultPoint) DropConnections() {
	for _, p := range f.proxies {
		p.DropConnections()
	}
}

// Close closes every proxy.
func (f *FaultPoint) Close() error {
	var errs []error
	for _, p := range f.proxies {
		errs = append(errs, p.Close())
	}
	return errors.Join(errs...)
}
