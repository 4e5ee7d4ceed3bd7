package msgauth

import (
	"fmt"

	"pimail/internal/message"
)

// authorDomains returns the distinct domains of the RFC5322.From
// addresses (RFC 7489 §6.6.1), in A-labels, read with the message
// toolkit's parser (the one IMAP and the webmail show the sender with).
// Every From field and every address counts, so a second author cannot
// hide a failing one. An address whose domain is not a host name is
// returned in invalid (as written, for the header) and evaluated as
// "none". limit is non-empty when the message names more authors than
// are evaluated: the caller must then fail closed.
func authorDomains(raw []byte) (domains, invalid []string, limit string) {
	authors, complete := message.Authors(raw)
	if !complete {
		return nil, nil, "a From field with more addresses than are read"
	}
	seen := map[string]bool{}
	for _, a := range authors {
		if a.Host == "" {
			continue
		}
		d, ok := message.ASCIIDomain(a.Host)
		if !ok {
			if !seen["!"+a.Host] {
				seen["!"+a.Host] = true
				invalid = append(invalid, a.Host)
			}
			continue
		}
		if !seen[d] {
			seen[d] = true
			domains = append(domains, d)
		}
	}
	if len(domains)+len(invalid) > message.MaxAuthorDomains {
		return nil, nil, fmt.Sprintf("more than %d From domains", message.MaxAuthorDomains)
	}
	return domains, invalid, ""
}
