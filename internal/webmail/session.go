package webmail

import "pimail/internal/websession"

// maxSessions bounds an account's webmail sessions; a login beyond it
// ends the least recently used.
const maxSessions = 100

// sessionApp names the webmail's sessions in the store.
const sessionApp = "webmail"

// session is one logged-in browser (internal/websession, shared with the
// web admin).
type session = websession.Session
