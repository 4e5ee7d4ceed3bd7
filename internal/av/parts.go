package av

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	"pimail/internal/message"
)

// scanParts scans a message larger than clamd takes in pieces of its own
// MIME structure: the leaf parts (attachments, text parts, the parts of
// enclosed messages) are put, whole and still encoded, into as few
// multipart/mixed messages of at most MaxSize bytes as they fit, and clamd
// scans each of those like any message (it decodes MIME and archives
// itself). No part is cut, so no signature is split between two scans; a
// single part larger than MaxSize is ErrTooLarge. The pieces are slices of
// raw: nothing is copied.
func (s *Scanner) scanParts(ctx context.Context, raw []byte, parsed *message.Parsed) (ScanResult, error) {
	var b [12]byte
	_, _ = rand.Read(b[:])
	boundary := "pimail-av-" + hex.EncodeToString(b[:])
	head := []byte("MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=\"" + boundary + "\"\r\n\r\n")
	sep := []byte("\r\n--" + boundary + "\r\n")
	tail := []byte("\r\n--" + boundary + "--\r\n")
	overhead := int64(len(head) + len(tail))
	max := s.cfg.Clamd.maxSize()

	var pieces [][]byte
	var size int64
	flush := func() (ScanResult, error) {
		if len(pieces) == 0 {
			return ScanResult{}, nil
		}
		r, err := s.cfg.Clamd.scanPieces(ctx, append(append([][]byte{head}, pieces...), tail))
		pieces, size = pieces[:0], 0
		return r, err
	}
	var err error
	var res ScanResult
	parsed.Body.Walk(func(p *message.Part) bool {
		if p.Type == "multipart" || p.Message != nil {
			return true
		}
		if p.HeaderStart < 0 || p.End > int64(len(raw)) || p.HeaderStart > p.End {
			return true
		}
		part := raw[p.HeaderStart:p.End]
		n := int64(len(sep) + len(part))
		if n+overhead > max {
			err = fmt.Errorf("part of %d bytes: %w", len(part), ErrTooLarge)
			return false
		}
		if size+n+overhead > max {
			if res, err = flush(); err != nil || res.Infected {
				return false
			}
		}
		pieces = append(pieces, sep, part)
		size += n
		return true
	})
	if err != nil || res.Infected {
		return res, err
	}
	return flush()
}
