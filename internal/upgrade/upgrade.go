// Package upgrade brings a data directory written by an older pimail up
// to date at start. Those versions kept state in files beside the
// database, each written by its own atomic-write routine: webmail
// preferences, spam models and the junk-training ledger, the SRS secret
// and the MTA-STS policies. All of it now lives in the store (package
// store's doc, "Everything is in the store"), in the tables the schema
// migration of store/sqlite (version 12) made for it. Run copies what it
// finds into the store, then moves the files out of the way, into
// DATA/backup/files-<time>/, beside the database snapshot that migration
// took, so that the old state stays whole for a downgrade.
//
// Run is idempotent and safe against crashes and concurrent starts: an
// item is written only where the store has none yet (the store wins: it
// may have been changed since the files were imported by a run that
// crashed before moving them), and files move only after their item is
// committed. A file that cannot be used (damaged, or for an account or
// domain that no longer exists) is moved with a warning, not imported.
package upgrade

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"pimail/internal/delivery"
	"pimail/internal/spam"
	"pimail/internal/store"
	"pimail/internal/webmail"
)

// Legacy names what older versions kept beside the database, relative
// to the data directory. Backups of those versions hold them too.
var Legacy = []string{legacyWebmail, legacySpam, legacySRS, legacyMTASTS}

const (
	legacyWebmail = "webmail" // <account id>.json: webmail preferences
	legacySpam    = "spam"    // base.model, account-<id>.model, account-<id>.trained
	legacySRS     = "srs.key" // the SRS secret's bytes
	legacyMTASTS  = "mta-sts" // <domain>.txt: the policy to publish
)

// Store is what Run writes the old state into.
type Store interface {
	store.Preferences
	store.SpamModels
	store.Secrets
	store.MTASTSPolicies
}

// Run moves the state of the legacy files in dataDir into st and the
// files into DATA/backup/files-<time>/. It returns how many items it
// imported. An error of the store stops it; the files not moved yet are
// taken up by the next Run.
func Run(ctx context.Context, st Store, dataDir string, log *slog.Logger) (int, error) {
	u := &upgrader{st: st, dir: dataDir, log: log.With("component", "upgrade")}
	steps := []struct {
		name string
		fn   func(ctx context.Context, path string) error
	}{
		{legacyWebmail, u.webmail},
		{legacySpam, u.spam},
		{legacySRS, u.srs},
		{legacyMTASTS, u.mtaSTS},
	}
	for _, s := range steps {
		p := filepath.Join(dataDir, s.name)
		if _, err := os.Lstat(p); errors.Is(err, os.ErrNotExist) {
			continue
		} else if err != nil {
			return u.n, fmt.Errorf("upgrade: %w", err)
		}
		if err := s.fn(ctx, p); err != nil {
			return u.n, fmt.Errorf("upgrade: %s: %w", s.name, err)
		}
		if err := u.moveAway(s.name); err != nil {
			return u.n, fmt.Errorf("upgrade: %w", err)
		}
	}
	return u.n, nil
}

type upgrader struct {
	st   Store
	dir  string
	log  *slog.Logger
	n    int    // items imported
	away string // DATA/backup/files-<time>, made on first use
}

// moveAway moves DATA/name into the backup directory of this run.
func (u *upgrader) moveAway(name string) error {
	if u.away == "" {
		u.away = filepath.Join(u.dir, "backup", "files-"+time.Now().UTC().Format("20060102T150405.000000000Z"))
		if err := os.MkdirAll(u.away, 0o700); err != nil {
			return fmt.Errorf("make %s: %w", u.away, err)
		}
	}
	err := os.Rename(filepath.Join(u.dir, name), filepath.Join(u.away, name))
	if errors.Is(err, os.ErrNotExist) {
		return nil // moved by a concurrent start
	}
	if err != nil {
		return fmt.Errorf("move %s away: %w", name, err)
	}
	// Not fsynced: a move lost in a crash is made again by the next Run,
	// which finds the items in the store already.
	u.log.Info("moved into the store; the old files are kept", "what", name, "kept", filepath.Join(u.away, name))
	return nil
}

// skip logs an item that is not imported; its file is kept with the rest.
func (u *upgrader) skip(path, why string) {
	u.log.Warn("not moved into the store: "+why, "file", path)
}

// stored counts an imported item, or logs one the store had already:
// errors other than those are the store's and stop the run.
func (u *upgrader) stored(path string, err error) error {
	switch {
	case err == nil:
		u.n++
		return nil
	case errors.Is(err, store.ErrModified), errors.Is(err, store.ErrExists):
		u.skip(path, "the store has one already, which is kept")
		return nil
	case errors.Is(err, store.ErrNotFound):
		u.skip(path, "its account or domain no longer exists")
		return nil
	case errors.Is(err, store.ErrInvalid):
		u.skip(path, err.Error())
		return nil
	}
	return err
}

// webmail imports DATA/webmail/<account id>.json.
func (u *upgrader) webmail(ctx context.Context, dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		idText, ok := strings.CutSuffix(e.Name(), ".json")
		id, err := strconv.ParseInt(idText, 10, 64)
		if !ok || err != nil || !e.Type().IsRegular() {
			continue // a temporary file of the old writer
		}
		doc, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if !json.Valid(doc) {
			u.skip(p, "not JSON")
			continue
		}
		_, err = u.st.SetPreferences(ctx, id, webmail.PrefsApp, doc, 0)
		if err := u.stored(p, err); err != nil {
			return err
		}
	}
	return nil
}

// spam imports DATA/spam/base.model and account-<id>.model, each account
// model with the junk ledger of DATA/spam/account-<id>.trained.
func (u *upgrader) spam(ctx context.Context, dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		var id int64
		switch name := e.Name(); {
		case name == "base.model":
			id = spam.BaseAccount
		case strings.HasPrefix(name, "account-") && strings.HasSuffix(name, ".model"):
			v, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(name, "account-"), ".model"), 10, 64)
			if err != nil || v <= 0 {
				continue
			}
			id = v
		default:
			continue // ledgers go with their model; temporary files stay behind
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := spam.CheckModel(data); err != nil {
			u.skip(p, err.Error())
			continue
		}
		var trained []store.JunkTrained
		if id != spam.BaseAccount {
			if trained, err = readLedger(filepath.Join(dir, fmt.Sprintf("account-%d.trained", id))); err != nil {
				return err
			}
		}
		_, err = u.st.SaveSpamModel(ctx, id, data, 0, trained)
		if err := u.stored(p, err); err != nil {
			return err
		}
	}
	return nil
}

// readLedger reads an old junk ledger: a line "<blob id> s" (spam) or
// "<blob id> h" (ham) per trained message. A damaged line forgets one
// decision; a missing file is an empty ledger.
func readLedger(path string) ([]store.JunkTrained, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []store.JunkTrained
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		id, class, ok := strings.Cut(sc.Text(), " ")
		v, err := strconv.ParseInt(id, 10, 64)
		if ok && err == nil && (class == "s" || class == "h") {
			out = append(out, store.JunkTrained{BlobID: v, Spam: class == "s"})
		}
	}
	return out, sc.Err()
}

// srs imports DATA/srs.key. When the store made a secret already (a
// start of this version before the upgrade), the store's stays: bounces
// to addresses rewritten with the old one are then refused.
func (u *upgrader) srs(ctx context.Context, path string) error {
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if len(old) == 0 {
		u.skip(path, "empty")
		return nil
	}
	got, err := u.st.Secret(ctx, delivery.SRSSecretName, old)
	if err != nil {
		return err
	}
	if !bytes.Equal(got, old) {
		u.skip(path, "the store has another SRS secret already, which is kept")
		return nil
	}
	u.n++
	return nil
}

// mtaSTS imports DATA/mta-sts/<domain>.txt.
func (u *upgrader) mtaSTS(ctx context.Context, dir string) error {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		domain, ok := strings.CutSuffix(e.Name(), ".txt")
		if !ok || !e.Type().IsRegular() || strings.HasPrefix(domain, ".") {
			continue
		}
		policy, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		_, err = u.st.MTASTSPolicy(ctx, domain)
		switch {
		case err == nil:
			err = store.ErrExists
		case errors.Is(err, store.ErrNotFound):
			err = u.st.SetMTASTSPolicy(ctx, domain, string(policy))
		}
		if err := u.stored(p, err); err != nil {
			return err
		}
	}
	return nil
}
