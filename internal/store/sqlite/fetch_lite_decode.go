package sqlite

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"syscall"

	"pimail/internal/message"
	"pimail/internal/store"
)

// decodeEnvelope decodes only the "env" member of a stored message.Parsed
// (JSON, RFC 8259), leaving the MIME tree undecoded.
func decodeEnvelope(pj []byte) (message.Envelope, error) {
	var env message.Envelope
	v, ok := jsonMember(pj, "env")
	if !ok {
		return env, errors.New("no envelope in the stored parse")
	}
	if fastEnvelope(v, &env) {
		return env, nil
	}
	env = message.Envelope{}
	if err := json.Unmarshal(v, &env); err != nil {
		return env, err
	}
	return env, nil
}

// decodeBodyStart returns Body.BodyStart of a stored message.Parsed, the
// size of the message header, or -1 when the parse has no body.
func decodeBodyStart(pj []byte) (int64, error) {
	at, ok := memberStart(pj, "body")
	if !ok || bytes.HasPrefix(pj[at:], []byte("null")) {
		return -1, nil
	}
	// Only the members before "bs" are walked: the child parts, after
	// it, are not scanned at all.
	bs, ok := jsonMember(pj[at:], "bs")
	if !ok {
		return 0, nil // omitted: zero
	}
	n, err := strconv.ParseInt(string(bs), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("header size %q: %w", bs, err)
	}
	return n, nil
}

// jsonMember returns the raw value of member key of the JSON object data
// (RFC 8259 §4), walking only the object's top level and skipping the
// values before it without decoding them. Keys are compared as written
// (ours never need escapes).
func jsonMember(data []byte, key string) ([]byte, bool) {
	var found []byte
	eachMember(data, func(k, v []byte) bool {
		if string(k) == key {
			found = v
			return false
		}
		return true
	})
	return found, found != nil
}

// memberStart returns the index in data of the value of member key of the
// JSON object data, without scanning that value.
func memberStart(data []byte, key string) (int, bool) {
	at := -1
	eachMemberStart(data, func(k []byte, vStart int) bool {
		if string(k) == key {
			at = vStart
			return false
		}
		return true
	})
	return at, at >= 0
}

// eachMember calls fn with the key (as written, without quotes) and the
// raw value of each member of the JSON object data until fn returns
// false. It reports false when data is not a well-formed object.
func eachMember(data []byte, fn func(k, v []byte) bool) bool {
	return eachMemberStart(data, func(k []byte, vStart int) bool {
		return fn(k, data[vStart:skipValue(data, vStart)])
	})
}

// eachMemberStart walks the members of the JSON object data like
// eachMember but gives fn where each value starts; a value is skipped
// only when fn returns true (to go on to the next member).
func eachMemberStart(data []byte, fn func(k []byte, vStart int) bool) bool {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return true
	}
	for range len(data) { // bounded: every round consumes input
		if i >= len(data) || data[i] != '"' {
			return false
		}
		kEnd := skipString(data, i)
		if kEnd-i < 2 {
			return false
		}
		k := data[i+1 : kEnd-1]
		i = skipSpace(data, kEnd)
		if i >= len(data) || data[i] != ':' {
			return false
		}
		vStart := skipSpace(data, i+1)
		if vStart >= len(data) {
			return false
		}
		if !fn(k, vStart) {
			return true
		}
		vEnd := skipValue(data, vStart)
		if vEnd <= vStart {
			return false
		}
		i = skipSpace(data, vEnd)
		if i < len(data) && data[i] == '}' {
			return true
		}
		if i >= len(data) || data[i] != ',' {
			return false
		}
		i = skipSpace(data, i+1)
	}
	return false
}

// eachElement calls fn with the raw value of each element of the JSON
// array data until fn returns false; false when data is not an array.
func eachElement(data []byte, fn func(v []byte) bool) bool {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '[' {
		return false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == ']' {
		return true
	}
	for range len(data) {
		vEnd := skipValue(data, i)
		if vEnd <= i || !fn(data[i:vEnd]) {
			return vEnd > i
		}
		i = skipSpace(data, vEnd)
		if i < len(data) && data[i] == ']' {
			return true
		}
		if i >= len(data) || data[i] != ',' {
			return false
		}
		i = skipSpace(data, i+1)
	}
	return false
}

func skipSpace(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\r' || data[i] == '\n') {
		i++
	}
	return i
}

// skipString returns the index after the string starting at data[i] ('"').
func skipString(data []byte, i int) int {
	for i++; i < len(data); i++ {
		switch data[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
	return len(data)
}

// skipValue returns the index after the JSON value starting at data[i].
func skipValue(data []byte, i int) int {
	if i >= len(data) {
		return i
	}
	switch data[i] {
	case '"':
		return skipString(data, i)
	case '{', '[':
		depth := 0
		for i < len(data) {
			switch data[i] {
			case '"':
				i = skipString(data, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
		return len(data)
	}
	for i < len(data) && bytes.IndexByte([]byte(",}] \t\r\n"), data[i]) < 0 {
		i++
	}
	return i
}

// readPrefix fills dst from the start of the file at path with pread(2)
// and returns how many bytes it read (fewer at the end of the file). It
// uses the system calls directly: three per file, no os.File.
func readPrefix(path string, dst []byte) (int, error) {
	if len(dst) == 0 {
		return 0, nil
	}
	fd, err := syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	for err == syscall.EINTR {
		fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_CLOEXEC, 0)
	}
	if err == syscall.ENOENT {
		// Collected after the last reference went away.
		return 0, fmt.Errorf("message file: %w", store.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("open message file: %w", err)
	}
	defer syscall.Close(fd)
	n := 0
	for n < len(dst) {
		m, err := syscall.Pread(fd, dst[n:], int64(n))
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return n, fmt.Errorf("read message file: %w", err)
		}
		if m == 0 {
			break
		}
		n += m
	}
	return n, nil
}

// headerLen is the size of the header of a message without a stored
// structure: up to and including the first empty line (RFC 5322 §2.1),
// whose line ends in CRLF or a bare LF, or all of it.
func headerLen(raw []byte) int {
	for i := 0; i < len(raw); {
		j := bytes.IndexByte(raw[i:], '\n')
		if j < 0 {
			break
		}
		line := raw[i : i+j+1]
		if len(line) == 1 || len(line) == 2 && line[0] == '\r' {
			return i + j + 1
		}
		i += j + 1
	}
	return len(raw)
}
