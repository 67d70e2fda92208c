package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"
)

// Proxy is a TCP proxy from a loopback listener to one upstream address,
// with faults that can be switched on and off while connections are open:
//
//   - Blackhole: no byte is forwarded in either direction, on open and on new
//     connections, until Heal; connections stay open, as in a network
//     partition where packets vanish. Bytes already read are held, not lost,
//     and flow again after Heal, so a connection survives a short partition
//     the way TCP does.
//   - Latency: every chunk is delivered no earlier than d after it was read,
//     in each direction, without limiting throughput.
//   - DropConnections: every open connection is closed at once (the client
//     sees a reset and reconnects).
//
// A Proxy is safe for concurrent use.
type Proxy struct {
	upstream string
	ln       net.Listener

	mu      sync.Mutex
	healed  chan struct{} // closed while traffic flows; replaced on Blackhole
	latency time.Duration
	conns   map[*proxyConn]struct{}
	closed  bool

	wg sync.WaitGroup
}

type proxyConn struct {
	client, server net.Conn
	once           sync.Once
}

func (c *proxyConn) close() {
	c.once.Do(func() {
		_ = c.client.Close()
		_ = c.server.Close()
	})
}

// NewProxy listens on a free loopback port and forwards every connection to
// upstream.
func NewProxy(upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("cluster: proxy listen: %w", err)
	}
	healed := make(chan struct{})
	close(healed)
	p := &Proxy{upstream: upstream, ln: ln, healed: healed, conns: make(map[*proxyConn]struct{})}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// Addr returns the proxy's listen address (host:port).
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Upstream returns the address the proxy forwards to.
func (p *Proxy) Upstream() string { return p.upstream }

// Blackhole stops all forwarding until Heal.
func (p *Proxy) Blackhole() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.healed:
		p.healed = make(chan struct{})
	default: // already blackholed
	}
}

// Heal ends a Blackhole; held bytes flow again.
func (p *Proxy) Heal() {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.healed:
	default:
		close(p.healed)
	}
}

// Blackholed reports whether the proxy is blackholed.
func (p *Proxy) Blackholed() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	select {
	case <-p.healed:
		return false
	default:
		return true
	}
}

// SetLatency delays every chunk by d in each direction (0 removes the delay).
func (p *Proxy) SetLatency(d time.Duration) {
	p.mu.Lock()
	p.latency = d
	p.mu.Unlock()
}

// DropConnections closes every open connection through the proxy.
func (p *Proxy) DropConnections() {
	p.mu.Lock()
	conns := make([]*proxyConn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.close()
	}
}

// Close stops the listener, closes every connection and waits for the
// proxy's goroutines to end.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	p.mu.Unlock()
	err := p.ln.Close()
	p.DropConnections()
	p.wg.Wait()
	return err
}

// state returns the channel that is closed while traffic flows, and the
// current latency.
func (p *Proxy) state() (<-chan struct{}, time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.healed, p.latency
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		client, err := p.ln.Accept()
		if err != nil {
			return
		}
		server, err := net.Dial("tcp", p.upstream)
		if err != nil {
			_ = client.Close()
			continue
		}
		c := &proxyConn{client: client, server: server}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.close()
			return
		}
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(2)
		go p.pipe(c, client, server)
		go p.pipe(c, server, client)
	}
}

type chunk struct {
	data []byte
	at   time.Time
}

// pipe copies src to dst through a queue so that a reader is never held up
// by the latency applied to earlier chunks.
func (p *Proxy) pipe(c *proxyConn, src, dst net.Conn) {
	defer p.wg.Done()
	ctx, cancel := context.WithCancel(context.Background())
	queue := make(chan chunk, 64)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ch := range queue {
			if err := p.deliver(ctx, ch, dst); err != nil {
				c.close()
				for range queue { // drain so the reader never blocks
				}
				return
			}
		}
	}()
	for {
		buf := make([]byte, 32<<10)
		n, err := src.Read(buf)
		if n > 0 {
			queue <- chunk{data: buf[:n], at: time.Now()}
		}
		if err != nil {
			break
		}
	}
	close(queue)
	cancel()
	<-done
	c.close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// deliver waits out blackholes and latency, then writes ch to dst.
func (p *Proxy) deliver(ctx context.Context, ch chunk, dst net.Conn) error {
	for {
		healed, latency := p.state()
		select {
		case <-healed:
		case <-ctx.Done():
			return ctx.Err()
		}
		if wait := time.Until(ch.at.Add(latency)); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return ctx.Err()
			}
			continue // re-check: a blackhole may have begun meanwhile
		}
		break
	}
	_, err := dst.Write(ch.data)
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return err
}
