package controlplane

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// fleetDialTimeout bounds a follower's dial to the leader's fleet port.
const fleetDialTimeout = 5 * time.Second

// fleetPort is the fleet-position listener (--fleet-listen) of a control
// plane whose state is in the Kubernetes API: on the leader, its
// connections go to the ADS server (which assigns positions); on a
// follower, each is forwarded, as bytes, to the leader's fleet address
// (the Lease's AddressAnnotation). A gateway's fleet.server names the
// Service of all replicas and reaches the leader whichever replica
// answers, with no change after a failover; a forwarded connection keeps
// its TLS end to end (docs/decisions.md, "State and leadership in the
// Kubernetes API").
//
// Invariants:
//   - A change of role or of leader cuts every connection open through
//     the port, so that no gateway keeps a fleet stream to a replica that
//     no longer assigns; the gateways reconnect and land on the leader,
//     which holds their positions for the grace.
//   - With no leader known, a connection is closed at once.
type fleetPort struct {
	lis   net.Listener
	local *handoff // the ADS server's listener on the leader
	log   *slog.Logger

	mu     sync.Mutex
	closed bool
	leader bool
	target string // the leader's fleet address, on a follower
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
}

func newFleetPort(lis net.Listener, log *slog.Logger) *fleetPort {
	return &fleetPort{lis: lis, local: newHandoff(lis.Addr()), log: log, conns: map[net.Conn]bool{}}
}

// serve accepts until the listener closes.
func (p *fleetPort) serve() {
	for {
		c, err := p.lis.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		switch {
		case p.closed:
			c.Close()
		case p.leader:
			tc := &trackedConn{Conn: c, port: p}
			p.conns[tc] = true
			p.local.give(tc)
		case p.target != "":
			p.conns[c] = true
			p.wg.Add(1)
			go p.forward(c, p.target)
		default:
			c.Close()
		}
		p.mu.Unlock()
	}
}

// setRole makes the port serve locally (leader) or forward to target;
// a change cuts every connection open through it.
func (p *fleetPort) setRole(leader bool, target string) {
	p.mu.Lock()
	if leader {
		target = ""
	}
	if p.leader == leader && p.target == target {
		p.mu.Unlock()
		return
	}
	p.leader, p.target = leader, target
	cut := p.conns
	p.conns = map[net.Conn]bool{}
	p.mu.Unlock()
	for c := range cut {
		c.Close()
	}
	if len(cut) > 0 {
		p.log.Info("control plane: fleet port: the leader changed; its connections are cut (gateways reconnect to the leader)",
			"connections", len(cut), "leader_here", leader, "forward_to", target)
	}
}

// forward copies between c and the leader at target until either closes.
func (p *fleetPort) forward(c net.Conn, target string) {
	defer p.wg.Done()
	defer p.drop(c)
	up, err := net.DialTimeout("tcp", target, fleetDialTimeout)
	if err != nil {
		p.log.Warn("control plane: fleet port: cannot reach the leader", "leader", target, "err", err)
		c.Close()
		return
	}
	p.mu.Lock()
	if !p.conns[c] { // cut meanwhile
		p.mu.Unlock()
		up.Close()
		c.Close()
		return
	}
	p.conns[up] = true
	p.mu.Unlock()
	defer p.drop(up)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		dst.Close()
		src.Close()
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
}

func (p *fleetPort) drop(c net.Conn) {
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

// close closes the listener and every connection, and waits for the
// forwards to end.
func (p *fleetPort) close() {
	p.mu.Lock()
	p.closed = true
	cut := p.conns
	p.conns = map[net.Conn]bool{}
	p.mu.Unlock()
	p.lis.Close()
	for c := range cut {
		c.Close()
	}
	p.local.Close()
	p.wg.Wait()
}

// trackedConn leaves the port's set when closed.
type trackedConn struct {
	net.Conn
	port *fleetPort
	once sync.Once
}

func (c *trackedConn) Close() error {
	c.once.Do(func() { c.port.drop(c) })
	return c.Conn.Close()
}

// handoff is a net.Listener whose connections are handed to it.
type handoff struct {
	addr   net.Addr
	conns  chan net.Conn
	done   chan struct{}
	closed sync.Once
}

func newHandoff(addr net.Addr) *handoff {
	return &handoff{addr: addr, conns: make(chan net.Conn), done: make(chan struct{})}
}

// give hands c to Accept, or closes it once the listener is closed.
func (h *handoff) give(c net.Conn) {
	go func() {
		select {
		case h.conns <- c:
		case <-h.done:
			c.Close()
		}
	}()
}

func (h *handoff) Accept() (net.Conn, error) {
	select {
	case c := <-h.conns:
		return c, nil
	case <-h.done:
		return nil, net.ErrClosed
	}
}

func (h *handoff) Close() error {
	h.closed.Do(func() { close(h.done) })
	return nil
}

func (h *handoff) Addr() net.Addr { return h.addr }

var _ net.Listener = (*handoff)(nil)

// errNoFleetPort refuses --fleet-listen without a state in the Kubernetes API.
var errNoFleetPort = errors.New("--fleet-listen serves fleet positions among replicas that share their state in the Kubernetes API: it needs --state kubernetes:NAMESPACE/NAME")
