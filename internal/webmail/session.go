package webmail

import "pimail/internal/websession"

// maxSessions bounds the in-memory session table; beyond it the oldest
// sessions are dropped first.
const maxSessions = 10000

// session is one logged-in browser (internal/websession, shared with the
// web admin).
type session = websession.Session
