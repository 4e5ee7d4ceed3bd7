package imapd

import (
	"strconv"
	"strings"
)

// OBJECTID (RFC 8474): names that stay with a mailbox and a message, so
// that a client recognises a renamed mailbox and a moved or copied
// message instead of fetching it again. They come from the store's IDs,
// which are never handed out twice (store/doc.go, "Identifiers"):
//
//   - MAILBOXID is "M" and Mailbox.ID: kept by RENAME (§4.2; renaming
//     INBOX makes a new mailbox, INBOX keeps its ID), a new one after
//     DELETE and CREATE of the same name, as that is a new UIDVALIDITY.
//     In CREATE's tagged OK (§4.1), SELECT and EXAMINE (§4.3) and STATUS
//     (§4.4, also in LIST-STATUS).
//   - EMAILID is "E" and the message's blob ID: the same for a message,
//     its COPY and its MOVE (§5.1), and, as §5.1 allows, for two
//     deliveries of the same bytes (one stored copy: a message sent to
//     two accounts has the same EMAILID in both). FETCH EMAILID, SEARCH
//     EMAILID (§6).
//   - THREADID: pimail keeps no thread of a message, so FETCH THREADID is
//     NIL (§5.2) and SEARCH THREADID matches nothing (§6). The THREAD
//     command (RFC 5256) computes threads on demand and is unaffected.
//
// The letters keep the IDs from looking like numbers a client might
// confuse with UIDs or sequence numbers; the numbers themselves say
// how many mailboxes and messages the server has stored, which a user
// learns anyway from UIDVALIDITY and is no secret of another user.

// mailboxObjectID is the MAILBOXID of a mailbox.
func mailboxObjectID(id int64) string { return "M" + strconv.FormatInt(id, 10) }

// emailObjectID is the EMAILID of a message with the blob blobID.
func emailObjectID(blobID int64) string { return "E" + strconv.FormatInt(blobID, 10) }

// blobOfEmailID returns the blob ID an EMAILID names; false for one
// pimail never hands out (which then names no message).
func blobOfEmailID(id string) (int64, bool) {
	n, ok := strings.CutPrefix(id, "E")
	if !ok || n == "" || n[0] == '0' {
		return 0, false
	}
	v, err := strconv.ParseInt(n, 10, 64)
	return v, err == nil
}
