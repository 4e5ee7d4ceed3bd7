package imapd

import (
	"bufio"
	"compress/flate"
	"fmt"

	"pimail/internal/imapwire"
	"pimail/internal/inflate"
)

// compressLevel trades CPU for bandwidth: mail is mostly text, and the
// fastest level already shrinks it well without loading a small board.
const compressLevel = flate.BestSpeed

// cmdCompress implements COMPRESS DEFLATE (RFC 4978): after the tagged OK,
// sent uncompressed, both directions are raw DEFLATE (RFC 1951) streams,
// and every flush of the server's responses is a DEFLATE sync flush so
// that the client can decode each response as it arrives (§4).
func cmdCompress(s *session, cmd *command) (string, string, error) {
	if len(cmd.args) != 1 || cmd.args[0].Kind != imapwire.KindAtom {
		return "", "", bad("COMPRESS needs a mechanism")
	}
	if upperASCII(cmd.args[0].Str) != "DEFLATE" {
		return "", "", bad("unknown compression mechanism")
	}
	if s.deflate != nil {
		return "", "", no("COMPRESSIONACTIVE", "compression is already active")
	}
	s.w.Tagged(cmd.tag, "OK", "", "DEFLATE active")
	if err := s.flush(); err != nil {
		return "", "", err
	}
	fw, err := flate.NewWriter(s.conn, compressLevel)
	if err != nil {
		return "", "", fmt.Errorf("compress: %w", err)
	}
	s.deflate = &deflateWriter{w: fw}
	// The decompressor reads through the old buffered reader, so data the
	// client sent right after the OK and already buffered is kept. It is
	// internal/inflate rather than compress/flate because clients such as
	// mbsync flush with zlib's Z_PARTIAL_FLUSH: the command's block is
	// followed by an empty fixed-Huffman block (RFC 1951 §3.2.6) whose last
	// bits only arrive with the next command, and compress/flate does not
	// return a non-final Huffman block's data until more input comes, so
	// the command would never be seen. inflate returns each block's data
	// as soon as the block ends.
	s.r.SetReader(bufio.NewReaderSize(inflate.NewReader(s.r.BufReader()), 16*1024))
	s.w.SetWriter(bufio.NewWriterSize(s.deflate, 16*1024))
	return "", "", errAlreadyAnswered
}

// deflateWriter sync-flushes only when something was written since the
// last flush: an empty flush block inflates to nothing, and some clients
// (mbsync) take a read that yields no bytes for a closed connection.
type deflateWriter struct {
	w     *flate.Writer
	dirty bool
}

func (d *deflateWriter) Write(p []byte) (int, error) {
	d.dirty = d.dirty || len(p) > 0
	return d.w.Write(p)
}

func (d *deflateWriter) Flush() error {
	if !d.dirty {
		return nil
	}
	d.dirty = false
	return d.w.Flush()
}
