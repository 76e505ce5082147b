package accept

import (
	"net"
	"sync"
)

// Set is one net.Listener over a changing set of listeners, so that a
// server's single accept loop can move to a new address without a
// restart: Add opens the new listener to its loop before Retire closes the
// old one, and no moment passes with nothing accepting.
//
// Invariants:
//   - Accept returns a connection from any listener of the set, or an
//     error only when the set is closed (net.ErrClosed) or a listener of
//     it failed for good (that listener's error: the server's loop ends,
//     as it would on that listener alone).
//   - A retired listener's error is not an error of the set.
//   - A connection accepted as the set closes is closed, never leaked.
//   - Addr is the address of the newest listener added.
type Set struct {
	conns chan net.Conn
	fail  chan error
	done  chan struct{}

	mu     sync.Mutex // guards following
	lns    []net.Listener
	last   net.Addr // the newest listener's, kept after Close
	closed bool
	wg     sync.WaitGroup
}

// NewSet returns a set of the listeners given.
func NewSet(lns ...net.Listener) *Set {
	s := &Set{conns: make(chan net.Conn), fail: make(chan error, 1), done: make(chan struct{})}
	for _, ln := range lns {
		s.Add(ln)
	}
	return s
}

// Add starts accepting from ln. On a closed set it closes ln.
func (s *Set) Add(ln net.Listener) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		ln.Close()
		return
	}
	s.lns = append(s.lns, ln)
	s.last = ln.Addr()
	s.wg.Add(1)
	go s.run(ln)
}

// Retire stops accepting from ln and closes it; connections it accepted
// carry on.
func (s *Set) Retire(ln net.Listener) {
	s.mu.Lock()
	for i, l := range s.lns {
		if l == ln {
			s.lns = append(s.lns[:i:i], s.lns[i+1:]...)
			break
		}
	}
	s.mu.Unlock()
	ln.Close()
}

// Listeners are the set's listeners, oldest first.
func (s *Set) Listeners() []net.Listener {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]net.Listener(nil), s.lns...)
}

func (s *Set) member(ln net.Listener) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, l := range s.lns {
		if l == ln {
			return true
		}
	}
	return false
}

func (s *Set) run(ln net.Listener) {
	defer s.wg.Done()
	for {
		c, err := ln.Accept()
		if err != nil {
			if s.member(ln) { // not retired, not closed: it failed for good
				select {
				case s.fail <- err:
				default:
				}
			}
			return
		}
		select {
		case s.conns <- c:
		case <-s.done:
			c.Close()
			return
		}
	}
}

// Accept waits for a connection from any listener of the set.
func (s *Set) Accept() (net.Conn, error) {
	select {
	case c := <-s.conns:
		return c, nil
	case err := <-s.fail:
		return nil, err
	case <-s.done:
		return nil, net.ErrClosed
	}
}

// Close closes every listener of the set and waits for their accept
// goroutines to end.
func (s *Set) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	lns := s.lns
	s.lns = nil
	close(s.done)
	s.mu.Unlock()
	for _, ln := range lns {
		ln.Close()
	}
	s.wg.Wait()
	return nil
}

// Addr is the address of the newest listener added (still after Close;
// nil before the first Add).
func (s *Set) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}
