package webmail

import (
	"errors"
	"net/http"
	"strings"
	"unicode"

	"pimail/internal/store"
)

// folderName checks a user-typed folder name.
func folderName(s string) (string, bool) {
	s = strings.TrimSpace(s)
	if s == "" || len(s) > 200 || strings.HasPrefix(s, "/") || strings.HasSuffix(s, "/") || strings.Contains(s, "//") {
		return "", false
	}
	for _, r := range s {
		if unicode.IsControl(r) || r == '*' || r == '%' {
			return "", false
		}
	}
	return s, true
}

type foldersData struct {
	view
}

func (s *Server) foldersPage(w http.ResponseWriter, r *http.Request, sess *session) {
	v, ok := s.newView(w, r, sess, "Folders")
	if !ok {
		return
	}
	switch r.URL.Query().Get("notice") {
	case "created":
		v.Notice = "Folder created."
	case "renamed":
		v.Notice = "Folder renamed."
	case "deleted":
		v.Notice = "Folder deleted."
	}
	s.page(w, r, "folders", foldersData{view: v})
}

// foldersSubmit creates (op=create, name), renames (op=rename, box, name)
// or deletes (op=delete, box) a folder. Special folders cannot be renamed
// or deleted here.
func (s *Server) foldersSubmit(w http.ResponseWriter, r *http.Request, sess *session) {
	ctx := r.Context()
	fail := func(code int, msg string) {
		v, ok := s.newView(w, r, sess, "Folders")
		if !ok {
			return
		}
		v.Error = msg
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.WriteHeader(code)
		_ = s.tmpl.render(w, "folders", foldersData{view: v})
	}
	op := r.PostFormValue("op")
	var err error
	notice := ""
	switch op {
	case "create":
		name, ok := folderName(r.PostFormValue("name"))
		if !ok {
			fail(http.StatusBadRequest, "That folder name is not allowed.")
			return
		}
		// A folder made here is subscribed, so that IMAP clients that
		// list subscribed folders show it (IMAP's CREATE subscribes
		// nothing, RFC 3501 §6.3.6; store/subscriptions.go).
		if _, err = s.st.CreateMailbox(ctx, sess.AccountID, name, store.SpecialNone); err == nil {
			err = s.st.SetSubscribed(ctx, sess.AccountID, name, true)
		}
		notice = "created"
	case "rename", "delete":
		box, e := s.mailboxOf(ctx, sess.AccountID, r.PostFormValue("box"))
		if e != nil {
			fail(http.StatusNotFound, "No such folder.")
			return
		}
		if box.SpecialUse != store.SpecialNone || strings.EqualFold(box.Name, "INBOX") {
			fail(http.StatusBadRequest, "Special folders cannot be renamed or deleted.")
			return
		}
		if op == "rename" {
			name, ok := folderName(r.PostFormValue("name"))
			if !ok {
				fail(http.StatusBadRequest, "That folder name is not allowed.")
				return
			}
			err = s.st.RenameMailbox(ctx, sess.AccountID, box.Name, name)
			notice = "renamed"
		} else {
			if err = s.st.DeleteMailbox(ctx, sess.AccountID, box.Name); err == nil {
				err = s.st.SetSubscribed(ctx, sess.AccountID, box.Name, false)
			}
			notice = "deleted"
		}
	default:
		fail(http.StatusBadRequest, "Unknown action.")
		return
	}
	switch {
	case errors.Is(err, store.ErrExists):
		fail(http.StatusConflict, "A folder with that name exists already.")
		return
	case errors.Is(err, store.ErrMailboxInUse):
		fail(http.StatusConflict, "That folder has subfolders; delete them first.")
		return
	case errors.Is(err, store.ErrInvalid) || errors.Is(err, store.ErrNotFound):
		fail(http.StatusBadRequest, "That is not possible.")
		return
	case err != nil:
		s.httpError(w, r, http.StatusInternalServerError, "The folder could not be changed.", err)
		return
	}
	http.Redirect(w, r, "/folders?notice="+notice, http.StatusSeeOther)
}
