package imapd

// QUOTA (RFC 9208). Every account has one quota root, "", covering all its
// mailboxes. No resource has a limit yet (account quotas come later), and
// a quota-resource always carries a limit (RFC 9208 §6 grammar), so the
// root's resource list is empty and no QUOTA=RES-* capability is
// advertised; usage is still visible through STATUS SIZE.

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
	s.w.Raw(`* QUOTA "" ()`).CRLF()
	return "", "", nil
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
	s.w.Raw(`* QUOTA "" ()`).CRLF()
	return "", "", nil
}
