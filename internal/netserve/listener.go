package netserve

import (
	"net"
	"sync"
)

// Listener applies the server's limits to the connections of ln, for a
// protocol that runs its own accept loop (net/http): Accept returns only
// connections within the limits, and each gives its place back when it is
// closed. Connections over a limit get the configured refusal and are
// closed, as in Serve. Put it under a TLS listener, not over one (net/http
// must see the *tls.Conn).
//
// Accept errors pass through: net/http retries temporary ones (out of
// file descriptors) with a growing delay, as Serve does.
func (s *Server) Listener(ln net.Listener) net.Listener {
	return &limitListener{Listener: ln, s: s}
}

type limitListener struct {
	net.Listener
	s *Server
}

func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		release, ok := l.s.admit(c)
		if !ok {
			continue
		}
		return &limitedConn{Conn: c, release: release}, nil
	}
}

// limitedConn gives its place back once, when it is first closed.
type limitedConn struct {
	net.Conn
	once    sync.Once
	release func()
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(c.release)
	return err
}
