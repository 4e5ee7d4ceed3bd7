package imapd

import (
	"fmt"
	"strconv"

	"pimail/internal/store"
)

// QUOTA (RFC 9208). Every account has one quota root, "", covering all its
// mailboxes, with one resource, STORAGE (RFC 9208 §5.1): the sum of the
// sizes of the account's messages, in units of 1024 octets. An account
// without a limit has a root with an empty resource list (a
// quota-resource always carries a limit, RFC 9208 §6 grammar), and
// QUOTA=RES-STORAGE (RFC 9208 §5) is advertised only to a logged-in
// account with a limit, since only then is the resource supported for
// it. SETQUOTA is not offered (no QUOTASET): limits are the
// administrator's (`pimail account quota`).

// quotaCapabilities are the QUOTA capabilities of the session: the limit
// is the account's as read for its login, so the OK [CAPABILITY] after a
// login costs no store query; the CAPABILITY command reads it again.
func (s *session) quotaCapabilities() []string {
	if s.acct.ID == 0 || s.acct.QuotaBytes == 0 {
		return []string{"QUOTA"}
	}
	return []string{"QUOTA", "QUOTA=RES-STORAGE"}
}

// writeQuota writes the QUOTA response of the account's root (RFC 9208
// §4.3.1): STORAGE usage rounded up and the limit rounded down to KiB, so
// that a client never sees more room than there is.
func (s *session) writeQuota() error {
	limit, used, err := s.srv.st.Quota(s.ctx, s.acct.ID)
	if err != nil {
		return fmt.Errorf("quota of account %d: %w", s.acct.ID, err)
	}
	if limit == 0 {
		s.w.Raw(`* QUOTA "" ()`).CRLF()
		return nil
	}
	s.w.Raw(`* QUOTA "" (STORAGE `).
		Raw(strconv.FormatInt((used+1023)/1024, 10)).Raw(" ").
		Raw(strconv.FormatInt(limit/1024, 10)).Raw(")").CRLF()
	return nil
}

// checkAppendQuota refuses, with the OVERQUOTA response code (RFC 9208
// §4.3, RFC 5530 §3), each APPEND not yet failed that would take the
// account over its STORAGE limit (RFC 9208 §5.1) once the ones before it
// are stored. It is checked before the store writes, so a full account
// never gets a partial message.
func (s *session) checkAppendQuota(reqs []*appendReq) {
	var limit, used int64
	var err error
	queried := false
	for _, r := range reqs {
		if r.err != nil {
			continue
		}
		if !queried {
			limit, used, err = s.srv.st.Quota(s.ctx, s.acct.ID)
			queried = true
		}
		switch {
		case err != nil:
			r.err = fmt.Errorf("quota of account %d: %w", s.acct.ID, err)
		case limit > 0 && used+r.total > limit:
			r.err = no("OVERQUOTA", "quota exceeded: the mailbox is full")
		default:
			used += r.total
		}
	}
}

// checkCopyQuota refuses a COPY of the messages uids of mailbox src that
// would take the account over its STORAGE limit with NO [OVERQUOTA]
// (RFC 9208 §4.3 and §5.1: COPY fails when it would exceed a quota of the
// target's root; RFC 9051 §6.4.7: on failure nothing is copied). It is
// checked before the store writes, so nothing is partly copied.
//
// MOVE (RFC 6851) is not checked: the account is one quota root, so a
// move within it leaves the usage unchanged, and a full account must stay
// able to move mail to Trash in order to delete it.
//
// The store's limits are soft (store.Quotas): two sessions copying at the
// same instant can both pass this check, as with APPEND.
func (s *session) checkCopyQuota(src int64, uids store.UIDSet) error {
	limit, used, err := s.srv.st.Quota(s.ctx, s.acct.ID)
	if err != nil {
		return fmt.Errorf("quota of account %d: %w", s.acct.ID, err)
	}
	if limit == 0 {
		return nil
	}
	if used >= limit {
		return no("OVERQUOTA", "quota exceeded: the mailbox is full")
	}
	metas, err := s.srv.st.Fetch(s.ctx, src, uids, store.FetchOptions{})
	if err != nil {
		return fmt.Errorf("sizes of messages to copy: %w", err)
	}
	var size int64
	for _, m := range metas {
		size += m.Size
	}
	if used+size > limit {
		return no("OVERQUOTA", "quota exceeded: copying %d messages (%d KiB) would go over the limit", len(metas), (size+1023)/1024)
	}
	return nil
}

// cmdGetQuotaRoot implements GETQUOTAROOT (RFC 9208 §4.3.2).
func cmdGetQuotaRoot(s *session, cmd *command) (string, string, error) {
	if len(cmd.args) != 1 {
		return "", "", bad("GETQUOTAROOT needs a mailbox name")
	}
	name, err := s.decodeName(cmd.args[0])
	if err != nil {
		return "", "", err
	}
	if _, err := s.srv.st.Mailbox(s.ctx, s.acct.ID, name); err != nil {
		return "", "", storeErr(err, "mailbox")
	}
	s.w.Raw("* QUOTAROOT ")
	s.writeName(name)
	s.w.Raw(` ""`).CRLF()
	return "", "", s.writeQuota()
}

// cmdGetQuota implements GETQUOTA (RFC 9208 §4.3.1) for the one root.
func cmdGetQuota(s *session, cmd *command) (string, string, error) {
	if len(cmd.args) != 1 {
		return "", "", bad("GETQUOTA needs a quota root")
	}
	root, ok := cmd.args[0].AString()
	if !ok {
		return "", "", bad("invalid quota root")
	}
	if root != "" {
		return "", "", no("NONEXISTENT", "no such quota root")
	}
	return "", "", s.writeQuota()
}
