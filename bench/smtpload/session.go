package main

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"net/smtp"
	"net/textproto"
	"time"
)

// conn is one SMTP connection of a worker.
type conn struct {
	nc  net.Conn
	c   *smtp.Client
	txn int // transactions done on it
}

// dial connects and says EHLO.
func dial(cfg *config) (*conn, error) {
	nc, err := net.DialTimeout("tcp", cfg.smtpAddr, 10*time.Second)
	if err != nil {
		return nil, fmt.Errorf("dial: %w", err)
	}
	_ = nc.SetDeadline(time.Now().Add(cfg.ioTimeout))
	host, _, _ := net.SplitHostPort(cfg.smtpAddr)
	c, err := smtp.NewClient(nc, host)
	if err != nil {
		nc.Close()
		return nil, fmt.Errorf("greeting: %w", err)
	}
	if err := c.Hello(cfg.helo); err != nil {
		nc.Close()
		return nil, fmt.Errorf("EHLO: %w", err)
	}
	return &conn{nc: nc, c: c}, nil
}

// quit ends the session politely; hangUp drops it.
func (k *conn) quit() {
	_ = k.nc.SetDeadline(time.Now().Add(5 * time.Second))
	_ = k.c.Quit()
	_ = k.nc.Close()
}

func (k *conn) hangUp() { _ = k.nc.Close() }

// outcome of one transaction.
type outcome int

const (
	accepted      outcome = iota // good message, 250 after the final dot
	bounced                      // every RCPT refused with 5xx, as expected
	bounceMissed                 // an unknown recipient was accepted
	rejected                     // a good message got a 4xx/5xx somewhere
	brokenSession                // I/O or protocol error: the connection is unusable
)

// sendGood runs MAIL, RCPT for every recipient and DATA (or BDAT) with msg.
func (k *conn) sendGood(cfg *config, rcpts []string, msg []byte) (outcome, error) {
	_ = k.nc.SetDeadline(time.Now().Add(cfg.ioTimeout))
	if err := k.c.Mail(cfg.from); err != nil {
		return classify(err, "MAIL")
	}
	for _, r := range rcpts {
		if err := k.c.Rcpt(r); err != nil {
			return classify(err, "RCPT "+r)
		}
	}
	// The message goes out in one write, through the client's exported
	// text connection: net/smtp's Data writer stuffs dots a byte at a
	// time, which was 42 % of the client's CPU at closed-50 on cores it
	// shares with the server.
	var data []byte
	if cfg.bdat {
		// RFC 3030 §2: the whole message as one last chunk, unstuffed.
		if _, err := fmt.Fprintf(k.c.Text.W, "BDAT %d LAST\r\n", len(msg)); err != nil {
			return brokenSession, fmt.Errorf("BDAT: %w", err)
		}
		data = msg
	} else {
		id, err := k.c.Text.Cmd("DATA")
		if err != nil {
			return brokenSession, fmt.Errorf("DATA: %w", err)
		}
		k.c.Text.StartResponse(id)
		_, _, err = k.c.Text.ReadResponse(354)
		k.c.Text.EndResponse(id)
		if err != nil {
			return classify(err, "DATA")
		}
		data = dotStuff(msg)
	}
	if _, err := k.c.Text.W.Write(data); err != nil {
		return brokenSession, fmt.Errorf("message data: %w", err)
	}
	if err := k.c.Text.W.Flush(); err != nil {
		return brokenSession, fmt.Errorf("message data: %w", err)
	}
	if _, _, err := k.c.Text.ReadResponse(250); err != nil {
		return classify(err, "end of data")
	}
	return accepted, nil
}

// dotStuff returns msg, whose lines end in CRLF, as DATA sends it
// (RFC 5321 §4.5.2): a line that starts with "." gets another in front,
// and the end of data is CRLF "." CRLF.
func dotStuff(msg []byte) []byte {
	out := make([]byte, 0, len(msg)+len(msg)/32+5)
	for len(msg) > 0 {
		if msg[0] == '.' {
			out = append(out, '.')
		}
		i := bytes.IndexByte(msg, '\n')
		if i < 0 {
			out = append(out, msg...)
			out = append(out, "\r\n"...)
			break
		}
		out = append(out, msg[:i+1]...)
		msg = msg[i+1:]
	}
	return append(out, ".\r\n"...)
}

// sendBounce runs MAIL and RCPT to unknown users; each RCPT must get a
// 5xx. No DATA follows (every recipient was refused): the caller resets
// or quits.
func (k *conn) sendBounce(cfg *config, rcpts []string) (outcome, error) {
	_ = k.nc.SetDeadline(time.Now().Add(cfg.ioTimeout))
	if err := k.c.Mail(cfg.from); err != nil {
		return classify(err, "MAIL")
	}
	for _, r := range rcpts {
		err := k.c.Rcpt(r)
		if err == nil {
			return bounceMissed, fmt.Errorf("RCPT %s: unknown user accepted", r)
		}
		var te *textproto.Error
		if !errors.As(err, &te) {
			return brokenSession, fmt.Errorf("RCPT %s: %w", r, err)
		}
		if te.Code < 500 {
			return rejected, fmt.Errorf("RCPT %s: temporary %d %s", r, te.Code, te.Msg)
		}
	}
	return bounced, nil
}

// reset sends RSET between transactions on a kept connection.
func (k *conn) reset(cfg *config) error {
	_ = k.nc.SetDeadline(time.Now().Add(cfg.ioTimeout))
	if err := k.c.Reset(); err != nil {
		return fmt.Errorf("RSET: %w", err)
	}
	return nil
}

// unfinished plays a client that gives up: after EHLO (done by dial) it
// either quits at once (half the time) or starts a transaction with a
// valid recipient and hangs up before DATA.
func (k *conn) unfinished(cfg *config, rcpt string, hangUp bool) error {
	if !hangUp {
		k.quit()
		return nil
	}
	_ = k.nc.SetDeadline(time.Now().Add(cfg.ioTimeout))
	err := k.c.Mail(cfg.from)
	if err == nil {
		err = k.c.Rcpt(rcpt)
	}
	k.hangUp()
	if err != nil {
		return fmt.Errorf("unfinished session: %w", err)
	}
	return nil
}

// classify maps an SMTP error to an outcome: a reply code means the
// server refused (the connection is still usable), anything else broke
// the session.
func classify(err error, step string) (outcome, error) {
	var te *textproto.Error
	if errors.As(err, &te) {
		return rejected, fmt.Errorf("%s: %d %s", step, te.Code, te.Msg)
	}
	return brokenSession, fmt.Errorf("%s: %w", step, err)
}
