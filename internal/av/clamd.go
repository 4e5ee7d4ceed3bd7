// Package av keeps malware out of the mailboxes: a client for ClamAV's
// clamd (local or remote) and a built-in attachment policy that needs no
// scanner, for the small machine that cannot spare clamd's memory.
package av

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"time"
)

// Clamd talks to a clamd daemon. The protocol is clamd's own (clamd(8),
// "COMMANDS"): a command prefixed with 'z' and terminated by NUL, and for
// INSTREAM the data as chunks, each a 4-byte big-endian length followed by
// that many bytes, ended by a zero-length chunk. The reply is one
// NUL-terminated line.
type Clamd struct {
	// Network is "unix" (Address is a socket path) or "tcp" (host:port).
	Network, Address string
	// Timeout bounds one whole command, connect to reply. Default 60 s.
	Timeout time.Duration
	// MaxSize is the most bytes sent; larger data is refused with
	// ErrTooLarge without contacting clamd. It should not exceed clamd's
	// StreamMaxLength (25 MiB by default). Default 25 MiB.
	MaxSize int64
	// ChunkSize is the INSTREAM chunk length. Default 64 KiB.
	ChunkSize int
}

// Errors of the clamd client.
var (
	// ErrUnavailable wraps failures to reach clamd or to get an answer.
	ErrUnavailable = errors.New("clamd unavailable")
	// ErrTooLarge: the data exceeds MaxSize (or clamd's own limit).
	ErrTooLarge = errors.New("too large for clamd")
)

// ScanResult is clamd's verdict on one stream.
type ScanResult struct {
	Infected  bool
	Signature string // the signature name when infected
}

func (c *Clamd) timeout() time.Duration {
	if c.Timeout > 0 {
		return c.Timeout
	}
	return 60 * time.Second
}

func (c *Clamd) maxSize() int64 {
	if c.MaxSize > 0 {
		return c.MaxSize
	}
	return 25 << 20
}

func (c *Clamd) dial(ctx context.Context) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout())
	defer cancel()
	var d net.Dialer
	conn, err := d.DialContext(ctx, c.Network, c.Address)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	dl := time.Now().Add(c.timeout())
	if t, ok := ctx.Deadline(); ok && t.Before(dl) {
		dl = t
	}
	conn.SetDeadline(dl)
	return conn, nil
}

// readReply reads one NUL-terminated reply of at most 4 KiB.
func readReply(conn net.Conn) (string, error) {
	b, err := io.ReadAll(io.LimitReader(conn, 4096))
	if err != nil && len(b) == 0 {
		return "", fmt.Errorf("%w: reading reply: %v", ErrUnavailable, err)
	}
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	if len(b) == 0 {
		return "", fmt.Errorf("%w: empty reply", ErrUnavailable)
	}
	return strings.TrimSpace(string(b)), nil
}

// Ping checks that clamd answers ("zPING" → "PONG").
func (c *Clamd) Ping(ctx context.Context) error {
	conn, err := c.dial(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.Write([]byte("zPING\x00")); err != nil {
		return fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	r, err := readReply(conn)
	if err != nil {
		return err
	}
	if r != "PONG" {
		return fmt.Errorf("%w: PING answered %q", ErrUnavailable, r)
	}
	return nil
}

// Scan sends data with INSTREAM and returns clamd's verdict.
func (c *Clamd) Scan(ctx context.Context, data []byte) (ScanResult, error) {
	return c.scanPieces(ctx, [][]byte{data})
}

// scanPieces sends the concatenation of pieces as one stream (a message
// put together from parts of another without copying them).
func (c *Clamd) scanPieces(ctx context.Context, pieces [][]byte) (ScanResult, error) {
	total := 0
	for _, p := range pieces {
		total += len(p)
	}
	if int64(total) > c.maxSize() {
		return ScanResult{}, fmt.Errorf("clamd scan: %d bytes: %w", total, ErrTooLarge)
	}
	conn, err := c.dial(ctx)
	if err != nil {
		return ScanResult{}, err
	}
	defer conn.Close()
	// Cancelling ctx unblocks a pending read or write.
	stop := context.AfterFunc(ctx, func() { conn.SetDeadline(time.Now()) })
	defer stop()

	chunk := c.ChunkSize
	if chunk <= 0 {
		chunk = 64 << 10
	}
	if _, err := conn.Write([]byte("zINSTREAM\x00")); err != nil {
		return ScanResult{}, fmt.Errorf("%w: %v", ErrUnavailable, err)
	}
	var hdr [4]byte
	for _, data := range pieces {
		for off := 0; off < len(data); off += chunk {
			end := min(off+chunk, len(data))
			binary.BigEndian.PutUint32(hdr[:], uint32(end-off))
			if _, err := conn.Write(hdr[:]); err != nil {
				return c.writeFailed(conn, err)
			}
			if _, err := conn.Write(data[off:end]); err != nil {
				return c.writeFailed(conn, err)
			}
		}
	}
	binary.BigEndian.PutUint32(hdr[:], 0)
	if _, err := conn.Write(hdr[:]); err != nil {
		return c.writeFailed(conn, err)
	}
	r, err := readReply(conn)
	if err != nil {
		return ScanResult{}, err
	}
	return parseScanReply(r)
}

// writeFailed reads what clamd said before it closed the stream: it
// closes early when StreamMaxLength is exceeded.
func (c *Clamd) writeFailed(conn net.Conn, werr error) (ScanResult, error) {
	conn.SetReadDeadline(time.Now().Add(time.Second))
	if r, err := readReply(conn); err == nil {
		if res, perr := parseScanReply(r); perr == nil || errors.Is(perr, ErrTooLarge) {
			return res, perr
		}
	}
	return ScanResult{}, fmt.Errorf("%w: sending data: %v", ErrUnavailable, werr)
}

// parseScanReply reads "stream: OK", "stream: <name> FOUND" or "<text> ERROR".
func parseScanReply(r string) (ScanResult, error) {
	switch {
	case strings.HasSuffix(r, " FOUND"):
		name := strings.TrimSuffix(r, " FOUND")
		if i := strings.Index(name, ": "); i >= 0 {
			name = name[i+2:]
		}
		return ScanResult{Infected: true, Signature: name}, nil
	case strings.HasSuffix(r, ": OK"):
		return ScanResult{}, nil
	case strings.Contains(r, "size limit exceeded"):
		return ScanResult{}, fmt.Errorf("clamd: %s: %w", r, ErrTooLarge)
	default:
		return ScanResult{}, fmt.Errorf("%w: clamd answered %q", ErrUnavailable, r)
	}
}
