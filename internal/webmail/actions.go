package webmail

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"pimail/internal/store"
)

// maxActionUIDs bounds the messages one action touches.
const maxActionUIDs = 5000

// localRedirect returns next when it is a path on this site, else fallback.
func localRedirect(next, fallback string) string {
	if strings.HasPrefix(next, "/") && !strings.HasPrefix(next, "//") && !strings.HasPrefix(next, "/\\") &&
		!strings.ContainsAny(next, "\r\n") {
		return next
	}
	return fallback
}

// action applies one operation to the selected messages of a mailbox
// (all of them with all=1): read, unread, flag, unflag, delete, move,
// copy, junk, notjunk.
func (s *Server) action(w http.ResponseWriter, r *http.Request, sess *session) {
	ctx := r.Context()
	box, err := s.mailboxOf(ctx, sess.AccountID, r.PostFormValue("box"))
	if err != nil {
		s.httpError(w, r, http.StatusNotFound, "No such folder.", nil)
		return
	}
	var set store.UIDSet
	if r.PostFormValue("all") == "1" {
		set = store.UIDSet{{Start: 1, Stop: 0}} // every message (Stop 0: to the highest UID)
	} else {
		for _, v := range r.PostForm["uid"] {
			u, err := strconv.ParseUint(v, 10, 32)
			if err != nil || u == 0 {
				continue
			}
			set = append(set, store.UIDRange{Start: uint32(u), Stop: uint32(u)})
			if len(set) >= maxActionUIDs {
				break
			}
		}
	}
	back := localRedirect(r.PostFormValue("next"), "/box/"+strconv.FormatInt(box.ID, 10))
	if len(set) == 0 {
		http.Redirect(w, r, back, http.StatusSeeOther)
		return
	}
	op := r.PostFormValue("op")
	if err := s.apply(ctx, sess, box, set, op, r.PostFormValue("target")); err != nil {
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrInvalid) {
			s.httpError(w, r, http.StatusBadRequest, "That action is not possible.", nil)
			return
		}
		s.httpError(w, r, http.StatusInternalServerError, "The action failed.", err)
		return
	}
	// After moving a message away from its page (or the reading pane),
	// return to its folder.
	if op == "delete" || op == "move" || op == "junk" || op == "notjunk" {
		if strings.HasPrefix(back, "/msg/") {
			back = "/box/" + strconv.FormatInt(box.ID, 10)
		} else if i := strings.Index(back, "&msg="); i >= 0 {
			back = back[:i]
		}
	}
	// A fetch from the page (drag and drop) needs no page back.
	if r.Header.Get("X-Requested-With") != "" {
		w.WriteHeader(http.StatusNoContent)
		return
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
}

func (s *Server) apply(ctx context.Context, sess *session, box store.Mailbox, set store.UIDSet, op, target string) error {
	flags := func(fop store.FlagOp, f store.Flags, kw ...string) error {
		_, err := s.st.StoreFlags(ctx, box.ID, set, fop, f, kw)
		return err
	}
	moveTo := func(special string) error {
		dst, err := s.specialMailbox(ctx, sess.AccountID, special)
		if err != nil {
			return err
		}
		if dst.ID == box.ID {
			return nil
		}
		_, err = s.st.Move(ctx, box.ID, set, dst.ID)
		return err
	}
	// What the action tells the junk trainer, decided before the messages
	// move (their blobs are read from the source folder).
	var train []int64
	spam, teach := junkVerdict(op)
	if op == "move" {
		if dst, e := s.mailboxOf(ctx, sess.AccountID, target); e == nil {
			spam, teach = store.JunkMove(box, dst)
		}
	}
	if teach && s.cfg.Junk != nil {
		metas, e := s.st.Fetch(ctx, box.ID, set, store.FetchOptions{})
		if e != nil {
			return fmt.Errorf("action %s on mailbox %d: %w", op, box.ID, e)
		}
		for _, m := range metas[:min(len(metas), maxJunkPerAction)] {
			train = append(train, m.BlobID)
		}
	}
	var err error
	switch op {
	case "read":
		err = flags(store.FlagsAdd, store.FlagSeen)
	case "unread":
		err = flags(store.FlagsRemove, store.FlagSeen)
	case "flag":
		err = flags(store.FlagsAdd, store.FlagFlagged)
	case "unflag":
		err = flags(store.FlagsRemove, store.FlagFlagged)
	case "delete":
		if box.SpecialUse == store.SpecialTrash {
			if err = flags(store.FlagsAdd, store.FlagDeleted); err == nil {
				_, err = s.st.Expunge(ctx, box.ID, set)
			}
		} else {
			err = moveTo(store.SpecialTrash)
		}
	case "move", "copy":
		dst, e := s.mailboxOf(ctx, sess.AccountID, target)
		if e != nil {
			return e
		}
		switch {
		case op == "copy":
			_, err = s.st.Copy(ctx, box.ID, set, dst.ID)
		case dst.ID != box.ID:
			_, err = s.st.Move(ctx, box.ID, set, dst.ID)
		}
	case "junk":
		if err = flags(store.FlagsRemove, 0, "$NotJunk"); err == nil {
			if err = flags(store.FlagsAdd, 0, "$Junk"); err == nil {
				err = moveTo(store.SpecialJunk)
			}
		}
	case "notjunk":
		if err = flags(store.FlagsRemove, 0, "$Junk"); err == nil {
			if err = flags(store.FlagsAdd, 0, "$NotJunk"); err == nil {
				err = moveTo(store.SpecialNone)
			}
		}
	default:
		return fmt.Errorf("action %q: %w", op, store.ErrInvalid)
	}
	if err != nil {
		return fmt.Errorf("action %s on mailbox %d: %w", op, box.ID, err)
	}
	for _, blob := range train {
		s.cfg.Junk.Junk(sess.AccountID, blob, spam)
	}
	return nil
}

// maxJunkPerAction bounds the messages one action hands to the trainer
// (as imapd does per command): the first thousand teach as much.
const maxJunkPerAction = 1000

// junkVerdict says what marking tells: "junk" is spam, "notjunk" ham.
// The $Junk / $NotJunk keywords set alongside are the ones IANA registered
// (RFC 5788 registry), which IMAP clients set for the same decision.
func junkVerdict(op string) (spam, ok bool) {
	switch op {
	case "junk":
		return true, true
	case "notjunk":
		return false, true
	}
	return false, false
}
