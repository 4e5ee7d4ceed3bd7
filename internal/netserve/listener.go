package netserve

import (
	"net"
	"sync"

	"pimail/internal/metrics"
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
		key, exempt := l.s.clientKey(c.RemoteAddr())
		if over := l.s.limits.Acquire(key, exempt); over != "" {
			l.s.refuse(c, key, over)
			continue
		}
		metrics.Connections.With(l.s.cfg.Name).Inc()
		active := metrics.ConnectionsActive.With(l.s.cfg.Name)
		active.Inc()
		return &limitedConn{Conn: c, release: func() {
			active.Dec()
			l.s.limits.Release(key)
		}}, nil
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
