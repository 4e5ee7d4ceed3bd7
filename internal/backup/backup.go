// Package backup takes and restores backups of a pimail data directory.
//
// A backup is a directory laid out like a data directory, plus a manifest:
//
//	OUT/pimail.db            consistent copy of the database (VACUUM INTO):
//	                         everything of the installation but the
//	                         messages kept in files (package store's doc)
//	OUT/blobs/<hh>/<sha256>  every message file the copy references
//	OUT/tls/ OUT/import/     certificates and keys, import journals (as found)
//	OUT/pimail-backup.json   the manifest, written last: a backup without
//	                         it is incomplete
//
// The full-text index (DATA/index.db) is derived data and is not copied:
// the server rebuilds it from the messages at start. Migration snapshots
// (DATA/backup/) are not copied either.
//
// Backups are taken online: the store's Snapshot makes the database copy in
// one read transaction and holds every message file it references (see
// sqlite.(*Store).Snapshot for how a file collected meanwhile is never
// lost). docs/upgrading.md describes the procedure for administrators.
package backup

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"pimail/internal/store/sqlite"
)

// ManifestName is the manifest file of a backup directory.
const ManifestName = "pimail-backup.json"

// ManifestFormat is the version of the backup layout. Backups of format
// 1 (made before all state moved into the database) also hold the files
// of upgrade.Legacy; Restore copies them too, and the server moves them
// into the store at its first start.
const ManifestFormat = 2

// AuxDirs are the directories of a data directory copied besides the
// database and the message files.
var AuxDirs = []string{"tls", "import"}

// Manifest describes a backup.
type Manifest struct {
	Format    int       `json:"format"`
	Created   time.Time `json:"created"`
	Source    string    `json:"source"`     // the data directory backed up
	Blobs     int       `json:"blobs"`      // message files
	BlobBytes int64     `json:"blob_bytes"` // their total size
	DBBytes   int64     `json:"db_bytes"`   // size of pimail.db
	AuxFiles  int       `json:"aux_files"`  // files copied from AuxDirs (and, in format 1, the legacy files)
	Linked    bool      `json:"linked"`     // message files are hard links to the source's
	Attempts  int       `json:"attempts"`   // snapshot attempts
	Locked    bool      `json:"locked"`     // the last attempt held the write lock
	Duration  string    `json:"duration"`
}

// Options tune Run.
type Options struct {
	// Copy copies message files instead of hard-linking them. Links cost no
	// space but share the disk with the data directory; a backup meant to
	// survive a disk failure belongs on another disk (then files are
	// copied anyway).
	Copy bool
}

// Run backs up the store into out, which must be empty or not exist.
func Run(ctx context.Context, st *sqlite.Store, out string, opts Options) (Manifest, error) {
	start := time.Now()
	m := Manifest{Format: ManifestFormat, Created: start.UTC(), Source: st.Dir()}
	ss, err := st.Snapshot(ctx, out, sqlite.SnapshotOptions{Copy: opts.Copy})
	if err != nil {
		return m, fmt.Errorf("backup: %w", err)
	}
	m.Blobs, m.BlobBytes, m.DBBytes = ss.Blobs, ss.BlobBytes, ss.DBBytes
	m.Linked = ss.Linked > 0 && ss.Copied == 0
	m.Attempts, m.Locked = ss.Attempts, ss.Locked
	for _, d := range AuxDirs {
		n, err := copyTree(filepath.Join(st.Dir(), d), filepath.Join(out, d))
		if err != nil {
			return m, fmt.Errorf("backup: %w", err)
		}
		m.AuxFiles += n
	}
	m.Duration = time.Since(start).Round(time.Millisecond).String()
	if err := writeManifest(out, m); err != nil {
		return m, fmt.Errorf("backup: %w", err)
	}
	return m, nil
}

// ReadManifest reads a backup's manifest; a directory without one is not a
// (complete) backup.
func ReadManifest(dir string) (Manifest, error) {
	var m Manifest
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if errors.Is(err, os.ErrNotExist) {
		return m, fmt.Errorf("%s is not a complete pimail backup: no %s", dir, ManifestName)
	}
	if err != nil {
		return m, fmt.Errorf("read manifest: %w", err)
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return m, fmt.Errorf("read manifest %s: %w", filepath.Join(dir, ManifestName), err)
	}
	if m.Format < 1 || m.Format > ManifestFormat {
		return m, fmt.Errorf("backup %s has format %d; this pimail reads formats 1 to %d", dir, m.Format, ManifestFormat)
	}
	return m, nil
}

func writeManifest(dir string, m Manifest) error {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("encode manifest: %w", err)
	}
	p := filepath.Join(dir, ManifestName)
	if err := writeFileSync(p, append(b, '\n')); err != nil {
		return err
	}
	return syncDir(dir)
}

// copyTree copies the regular files under src (or the file src) to dst
// (created as needed) and fsyncs them, skipping temporary files (".name"
// or "*.tmp", written and renamed into place by their owners). A missing
// src copies nothing. It returns the number of files copied.
func copyTree(src, dst string) (int, error) {
	if _, err := os.Stat(src); errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	n := 0
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		name := d.Name()
		if p != src && (strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".tmp")) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.MkdirAll(target, 0o700)
		case d.Type().IsRegular():
			if err := copyFile(p, target); err != nil {
				if errors.Is(err, os.ErrNotExist) {
					return nil // replaced or removed by its owner meanwhile
				}
				return err
			}
			n++
		}
		return nil
	})
	if err != nil {
		return n, fmt.Errorf("copy %s: %w", src, err)
	}
	return n, syncTree(dst)
}

// copyFile copies one file with its permission bits and fsyncs it.
func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
	if err != nil {
		return fmt.Errorf("create %s: %w", to, err)
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return fmt.Errorf("copy %s: %w", from, err)
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return fmt.Errorf("fsync %s: %w", to, err)
	}
	if err := out.Close(); err != nil {
		return fmt.Errorf("close %s: %w", to, err)
	}
	return nil
}

func writeFileSync(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("create %s: %w", path, err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("fsync %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", path, err)
	}
	return nil
}

// syncTree fsyncs every directory under (and including) root, so that the
// entries created in them survive a crash.
func syncTree(root string) error {
	if _, err := os.Stat(root); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return syncDir(p)
		}
		return nil
	})
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("open %s for fsync: %w", dir, err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}
