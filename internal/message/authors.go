package message

// MaxAuthorDomains is the most distinct author domains a message may
// name in its From fields. Each is authenticated (DMARC, RFC 7489 §6.6.1)
// and a message with more is refused rather than half checked.
const MaxAuthorDomains = 10

// Authors returns the mailboxes of every From field of raw (RFC 5322
// §3.6.2: the author or authors), in header order, read with the same
// parser that describes the message for IMAP and the webmail, so the
// sender a check authenticates is the sender a person sees. complete is
// false when a From field has more entries than are kept (maxAddresses);
// a caller that must see every author then fails closed. Group markers
// are left out.
func Authors(raw []byte) (list []Address, complete bool) {
	complete = true
	ScanFields(raw, func(f RawField) bool {
		if !f.Is("From") {
			return true
		}
		addrs, ok := parseAddressList(f.Unfolded())
		complete = complete && ok
		for _, a := range addrs {
			if a.Group == "" && !a.End {
				list = append(list, a)
			}
		}
		return true
	})
	return list, complete
}
