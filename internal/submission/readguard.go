package submission

import (
	"crypto/tls"
	"errors"
	"net"
	"time"
)

// guardListener hands out guardConns.
type guardListener struct {
	net.Listener
	// tls, when set, is the configuration for connections that arrive
	// already wrapped by tls.NewListener (see Accept).
	tls *tls.Config
}

func (l guardListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*tls.Conn); ok && l.tls != nil {
		// An implicit-TLS listener (465) wrapped by the caller: the
		// handshake has not started, so the guard goes under a fresh
		// TLS server. go-smtp must see the *tls.Conn itself, or it
		// takes the session for plain text (offers STARTTLS, and no
		// AUTH).
		return tls.Server(&guardConn{Conn: tc.NetConn()}, l.tls), nil
	}
	return &guardConn{Conn: c}, nil
}

// guardConn ends input for good when a read deadline passes. go-smtp reads
// commands through bufio.Reader.ReadLine, which hands back a partial line
// with a nil error when the deadline passes mid-line and drops the
// timeout; go-smtp then sets a fresh deadline, so a client trickling a
// byte at a time (slowloris) would never be timed out, and the fragment
// would be taken as a command. Shutting the read side makes the next read
// see end of input, so the session ends at ReadTimeout (RFC 5321
// §4.5.3.2.7) whatever the client trickles. internal/smtpd's gatedConn
// does the same for port 25.
type guardConn struct{ net.Conn }

func (c *guardConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if err != nil && isTimeout(err) {
		_ = c.closeRead()
	}
	return n, err
}

func (c *guardConn) closeRead() error {
	if cr, ok := c.Conn.(interface{ CloseRead() error }); ok {
		return cr.CloseRead()
	}
	return c.Conn.SetReadDeadline(time.Now())
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
