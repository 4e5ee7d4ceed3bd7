package mailimport

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"pimail/internal/store"
)

// importFolder copies the messages of one remote folder that are newer
// than its journal state, in batches of UIDs.
func (im *Importer) importFolder(ctx context.Context, c *imapclient.Client, j *journal, f remoteFolder, mb store.Mailbox, src IMAPSource) error {
	sel, err := c.Select(f.name, &imap.SelectOptions{ReadOnly: true}).Wait()
	if err != nil {
		return fmt.Errorf("examine %q: %w", f.name, err)
	}
	st, known := j.get(f.name)
	if known && st.UIDValidity != sel.UIDValidity {
		if !src.Reimport {
			return fmt.Errorf("folder %q: UIDVALIDITY changed from %d to %d; import it again with the reimport option (messages already copied would be copied twice)",
				f.name, st.UIDValidity, sel.UIDValidity)
		}
		im.log.Warn("UIDVALIDITY changed: importing the folder again", "folder", f.name)
		known = false
	}
	if !known {
		st = folderState{UIDValidity: sel.UIDValidity}
		if err := j.set(f.name, st); err != nil {
			return errStore{err}
		}
	}
	if sel.NumMessages == 0 || (sel.UIDNext != 0 && uint32(sel.UIDNext) <= st.LastUID+1) {
		im.log.Info("folder up to date", "folder", f.name, "last_uid", st.LastUID)
		return nil
	}
	uids, err := newUIDs(c, st.LastUID)
	if err != nil {
		return fmt.Errorf("folder %q: %w", f.name, err)
	}
	im.log.Info("importing folder", "folder", f.name, "into", mb.Name, "messages", len(uids), "after_uid", st.LastUID)

	fi := &folderImport{im: im, j: j, folder: f.name, mb: mb, state: st}
	if st.LastUID > 0 {
		// Resuming: the newest local message may be the first remote one
		// left, if a crash came between storing it and its journal line.
		fi.checkDup = im.newestRaw(ctx, mb.ID)
	}
	for start := 0; start < len(uids); start += src.Batch {
		batch := uids[start:min(start+src.Batch, len(uids))]
		if err := fi.fetchBatch(ctx, c, batch); err != nil {
			return err
		}
	}
	return nil
}

// newUIDs lists the UIDs above last in ascending order.
func newUIDs(c *imapclient.Client, last uint32) ([]uint32, error) {
	var set imap.UIDSet
	set.AddRange(imap.UID(last+1), 0) // last+1:*
	data, err := c.UIDSearch(&imap.SearchCriteria{UID: []imap.UIDSet{set}}, nil).Wait()
	if err != nil {
		return nil, fmt.Errorf("uid search: %w", err)
	}
	var out []uint32
	for _, u := range data.AllUIDs() {
		// "n:*" includes the highest UID even when it is below n
		// (RFC 9051 §6.4.8).
		if uint32(u) > last {
			out = append(out, uint32(u))
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// newestRaw returns the bytes of the newest message of a local mailbox.
func (im *Importer) newestRaw(ctx context.Context, mailboxID int64) []byte {
	metas, err := im.st.UIDs(ctx, mailboxID)
	if err != nil || len(metas) == 0 {
		return nil
	}
	raw, err := im.st.ReadBlob(ctx, metas[len(metas)-1].BlobID)
	if err != nil {
		return nil
	}
	return raw
}

// folderImport is the state of one folder's import.
type folderImport struct {
	im       *Importer
	j        *journal
	folder   string
	mb       store.Mailbox
	state    folderState
	checkDup []byte // compare the first message with this; nil: no check
}

// fetchBatch fetches and stores one batch of UIDs (ascending). The journal
// advances to the highest UID below which every requested message is
// stored, so that a server answering out of order cannot make a later run
// miss a message; after the FETCH completes, UIDs the server did not
// return (expunged meanwhile) count as done.
func (fi *folderImport) fetchBatch(ctx context.Context, c *imapclient.Client, batch []uint32) error {
	var set imap.UIDSet
	for _, u := range batch {
		set.AddNum(imap.UID(u))
	}
	cmd := c.Fetch(set, &imap.FetchOptions{
		UID:          true,
		Flags:        true,
		InternalDate: true,
		BodySection:  []*imap.FetchItemBodySection{{Peek: true}},
	})
	done := make(map[uint32]bool, len(batch))
	next := 0 // batch[next] is the first UID not known to be stored
	advance := func() error {
		old := next
		for next < len(batch) && done[batch[next]] {
			next++
		}
		if next == old {
			return nil
		}
		fi.state.LastUID = batch[next-1]
		if err := fi.j.set(fi.folder, fi.state); err != nil {
			return errStore{err}
		}
		return nil
	}
	for {
		msg := cmd.Next()
		if msg == nil {
			break
		}
		uid, err := fi.storeOne(ctx, msg)
		if err != nil {
			cmd.Close()
			return err
		}
		if uid != 0 {
			done[uid] = true
			if err := advance(); err != nil {
				cmd.Close()
				return err
			}
		}
	}
	if err := cmd.Close(); err != nil {
		return fmt.Errorf("uid fetch: %w", err)
	}
	for _, u := range batch {
		done[u] = true
	}
	return advance()
}

// storeOne reads one FETCH response and stores the message. It returns
// the message's UID (0 if the response had none, e.g. an unsolicited flag
// update).
func (fi *folderImport) storeOne(ctx context.Context, msg *imapclient.FetchMessageData) (uint32, error) {
	im := fi.im
	var uid uint32
	m := &Message{}
	var haveBody bool
	for {
		item := msg.Next()
		if item == nil {
			break
		}
		switch it := item.(type) {
		case imapclient.FetchItemDataUID:
			uid = uint32(it.UID)
		case imapclient.FetchItemDataFlags:
			m.Flags, m.Keywords = imapFlags(it.Flags)
		case imapclient.FetchItemDataInternalDate:
			m.InternalDate = it.Time
		case imapclient.FetchItemDataBodySection:
			if it.Literal == nil {
				continue
			}
			if it.Literal.Size() > im.maxSize() {
				im.skip("too large", "folder", fi.folder, "size", it.Literal.Size())
				continue // the client discards the rest of the literal
			}
			raw := make([]byte, it.Literal.Size())
			if _, err := io.ReadFull(it.Literal, raw); err != nil {
				return 0, fmt.Errorf("read message: %w", err)
			}
			m.Raw, haveBody = raw, true
		}
	}
	if uid == 0 {
		return 0, nil
	}
	if !haveBody || len(m.Raw) == 0 {
		if haveBody {
			im.skip("empty message", "folder", fi.folder, "uid", uid)
		}
		return uid, nil
	}
	if fi.checkDup != nil {
		dup := bytes.Equal(fi.checkDup, m.Raw)
		fi.checkDup = nil
		if dup {
			im.log.Info("message already stored by an interrupted run", "folder", fi.folder, "uid", uid)
			im.mu.Lock()
			im.stats.Skipped++
			im.mu.Unlock()
			return uid, nil
		}
	}
	if _, err := im.Append(ctx, fi.mb, m); err != nil {
		return 0, errStore{err}
	}
	return uid, nil
}

// imapFlags maps IMAP flags to store flags and keywords; \Recent and
// unknown system flags are dropped.
func imapFlags(flags []imap.Flag) (store.Flags, []string) {
	var f store.Flags
	var kws []string
	for _, fl := range flags {
		s := string(fl)
		switch strings.ToLower(s) {
		case `\seen`:
			f |= store.FlagSeen
		case `\answered`:
			f |= store.FlagAnswered
		case `\flagged`:
			f |= store.FlagFlagged
		case `\deleted`:
			f |= store.FlagDeleted
		case `\draft`:
			f |= store.FlagDraft
		default:
			if !strings.HasPrefix(s, `\`) {
				kws = append(kws, s)
			}
		}
	}
	return f, kws
}
