package backup

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	"pimail/internal/store/sqlite"
	"pimail/internal/upgrade"
)

// RestoreStats describes a finished restore.
type RestoreStats struct {
	Manifest  Manifest
	Blobs     int
	BlobBytes int64
	AuxFiles  int
}

// Restore copies the backup in from into the data directory to, which must
// be empty or not exist (a restore never mixes with existing data). Every
// message file is copied, fsynced and checked against its SHA-256 name, so a
// damaged backup is noticed here. On failure the partly written contents of
// to are removed. The full-text index is rebuilt when the server starts.
func Restore(ctx context.Context, from, to string) (RestoreStats, error) {
	var rs RestoreStats
	m, err := ReadManifest(from)
	if err != nil {
		return rs, fmt.Errorf("restore: %w", err)
	}
	rs.Manifest = m
	if err := emptyTarget(to); err != nil {
		return rs, fmt.Errorf("restore: %w", err)
	}
	ok := false
	defer func() {
		if !ok {
			clearDir(to)
		}
	}()
	if err := copyFile(filepath.Join(from, "pimail.db"), filepath.Join(to, "pimail.db")); err != nil {
		return rs, fmt.Errorf("restore: database: %w", err)
	}
	if err := restoreBlobs(ctx, filepath.Join(from, "blobs"), filepath.Join(to, "blobs"), &rs); err != nil {
		return rs, fmt.Errorf("restore: %w", err)
	}
	aux := AuxDirs
	if m.Format == 1 {
		aux = append(slices.Clone(aux), upgrade.Legacy...)
	}
	for _, d := range aux {
		n, err := copyTree(filepath.Join(from, d), filepath.Join(to, d))
		if err != nil {
			return rs, fmt.Errorf("restore: %w", err)
		}
		rs.AuxFiles += n
	}
	if err := syncDir(to); err != nil {
		return rs, fmt.Errorf("restore: %w", err)
	}
	ok = true
	return rs, nil
}

// restoreBlobs copies blobs/<hh>/<sha> with hash checks.
func restoreBlobs(ctx context.Context, from, to string, rs *RestoreStats) error {
	if err := os.MkdirAll(filepath.Join(to, "tmp"), 0o700); err != nil {
		return fmt.Errorf("create %s: %w", to, err)
	}
	subs, err := os.ReadDir(from)
	if err != nil {
		return fmt.Errorf("list %s: %w", from, err)
	}
	for _, sub := range subs {
		hh := sub.Name()
		if !sub.IsDir() || len(hh) != 2 {
			continue
		}
		ents, err := os.ReadDir(filepath.Join(from, hh))
		if err != nil {
			return fmt.Errorf("list %s: %w", hh, err)
		}
		if err := os.MkdirAll(filepath.Join(to, hh), 0o700); err != nil {
			return fmt.Errorf("create %s: %w", hh, err)
		}
		for _, e := range ents {
			if err := ctx.Err(); err != nil {
				return err
			}
			sha := e.Name()
			if len(sha) != 64 || sha[:2] != hh || !e.Type().IsRegular() {
				return fmt.Errorf("unexpected file %s in the backup's blobs", filepath.Join(hh, sha))
			}
			n, err := sqlite.CopyBlobFile(filepath.Join(from, hh, sha), filepath.Join(to, hh, sha), sha)
			if err != nil {
				return err
			}
			rs.Blobs++
			rs.BlobBytes += n
		}
		if err := syncDir(filepath.Join(to, hh)); err != nil {
			return err
		}
	}
	return syncDir(to)
}

// emptyTarget creates dir or checks that it is empty.
func emptyTarget(dir string) error {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("create %s: %w", dir, err)
		}
		return nil
	}
	if err != nil {
		return fmt.Errorf("read %s: %w", dir, err)
	}
	if len(ents) > 0 {
		return fmt.Errorf("%s is not empty: restore only into a new or empty directory", dir)
	}
	return nil
}

// clearDir removes what a failed restore wrote into dir (which was empty).
func clearDir(dir string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		_ = os.RemoveAll(filepath.Join(dir, e.Name()))
	}
}
