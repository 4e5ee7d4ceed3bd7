package mailimport

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
)

// journalMagic is the first line of an IMAP import journal.
const journalMagic = "pimail-imap-import 1"

// folderState is how far the import of one remote folder got: every
// message with a UID up to LastUID (under UIDValidity) is stored.
type folderState struct {
	UIDValidity uint32
	LastUID     uint32
}

// journal records folderState durably: one line per change, fsynced, so
// that a crash loses at most the line being written. Lines are
// "<uidvalidity> <uid> <Go-quoted remote folder name>"; the last line of a
// folder wins. Open rewrites the file compactly.
type journal struct {
	path  string
	f     *os.File
	mu    sync.Mutex // folders are imported in parallel
	state map[string]folderState
}

// IMAPStatePath is where the journal of an import from user at addr into
// account lives: DIR/import/imap-<16 hex digits of a SHA-256>.journal.
func IMAPStatePath(dataDir, account, addr, user string) string {
	sum := sha256.Sum256([]byte(strings.ToLower(account) + "\x00" + strings.ToLower(addr) + "\x00" + user))
	return filepath.Join(dataDir, "import", "imap-"+hex.EncodeToString(sum[:8])+".journal")
}

// openJournal loads the journal at path (a missing file is an empty one),
// writes it back compacted and opens it for appending.
func openJournal(path string) (*journal, error) {
	j := &journal{path: path, state: map[string]folderState{}}
	if err := j.load(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("create journal directory: %w", err)
	}
	if err := j.compact(); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open journal: %w", err)
	}
	j.f = f
	return j, nil
}

func (j *journal) load() error {
	f, err := os.Open(j.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("open journal: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 4096), 64<<10)
	first := true
	for sc.Scan() {
		line := sc.Text()
		if first {
			first = false
			if line != journalMagic {
				return fmt.Errorf("journal %s: not an import journal", j.path)
			}
			continue
		}
		name, st, ok := parseJournalLine(line)
		if !ok {
			// A torn last line (crash while writing) is ignored.
			continue
		}
		j.state[name] = st
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("read journal: %w", err)
	}
	return nil
}

func parseJournalLine(line string) (string, folderState, bool) {
	a, rest, ok1 := strings.Cut(line, " ")
	b, q, ok2 := strings.Cut(rest, " ")
	if !ok1 || !ok2 {
		return "", folderState{}, false
	}
	v, err1 := strconv.ParseUint(a, 10, 32)
	u, err2 := strconv.ParseUint(b, 10, 32)
	name, err3 := strconv.Unquote(q)
	if err1 != nil || err2 != nil || err3 != nil {
		return "", folderState{}, false
	}
	return name, folderState{UIDValidity: uint32(v), LastUID: uint32(u)}, true
}

func journalLine(name string, st folderState) string {
	return fmt.Sprintf("%d %d %s\n", st.UIDValidity, st.LastUID, strconv.Quote(name))
}

// compact writes the current state to a new file and renames it into
// place, durably.
func (j *journal) compact() error {
	names := make([]string, 0, len(j.state))
	for n := range j.state {
		names = append(names, n)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString(journalMagic + "\n")
	for _, n := range names {
		b.WriteString(journalLine(n, j.state[n]))
	}
	tmp := j.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write journal: %w", err)
	}
	if _, err := f.WriteString(b.String()); err != nil {
		f.Close()
		return fmt.Errorf("write journal: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("fsync journal: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close journal: %w", err)
	}
	if err := os.Rename(tmp, j.path); err != nil {
		return fmt.Errorf("rename journal: %w", err)
	}
	d, err := os.Open(filepath.Dir(j.path))
	if err != nil {
		return fmt.Errorf("sync journal directory: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("sync journal directory: %w", err)
	}
	return nil
}

// get returns the state of a remote folder.
func (j *journal) get(name string) (folderState, bool) {
	j.mu.Lock()
	defer j.mu.Unlock()
	st, ok := j.state[name]
	return st, ok
}

// set records the state of a remote folder and fsyncs it.
func (j *journal) set(name string, st folderState) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	if _, err := j.f.WriteString(journalLine(name, st)); err != nil {
		return fmt.Errorf("write journal: %w", err)
	}
	if err := j.f.Sync(); err != nil {
		return fmt.Errorf("fsync journal: %w", err)
	}
	j.state[name] = st
	return nil
}

func (j *journal) Close() error {
	if err := j.f.Close(); err != nil {
		return fmt.Errorf("close journal: %w", err)
	}
	return nil
}
