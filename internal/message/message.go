// Package message parses raw Internet messages (RFC 5322, MIME RFC 2045–2049)
// into a protocol-neutral description: the header fields an index needs, the
// envelope fields exactly as they appear in the header, and the MIME part tree
// with byte offsets into the raw message.
//
// Parsing never fails: broken mail is stored as received, so a message whose
// MIME structure cannot be understood is described as a single text/plain
// part, and a header that cannot be decoded keeps its raw bytes.
//
// The description is computed once at delivery, stored beside the message in
// the store, and used by every protocol (IMAP ENVELOPE and BODYSTRUCTURE,
// section fetches, search) without re-reading the message.
package message

import "time"

// Address is one mailbox from an address-list header field. Name and the
// local part are kept as they appear in the header (encoded words are not
// decoded), so protocols that must return the header's own text can.
type Address struct {
	Name    string `json:"n,omitempty"` // display name, unquoted, encoded words kept
	Mailbox string `json:"m,omitempty"` // local part
	Host    string `json:"h,omitempty"` // domain
	Route   string `json:"r,omitempty"` // obsolete source route, "@a,@b" (RFC 5322 §4.4)
	// Group is set on the start marker of an RFC 5322 group ("name:");
	// a marker with Group == "" and End == true closes the group.
	Group string `json:"g,omitempty"`
	End   bool   `json:"e,omitempty"`
}

// Envelope holds the header fields that describe a message. String values are
// unfolded but otherwise raw (encoded words are kept); empty means absent.
type Envelope struct {
	Date      string    `json:"date,omitempty"`
	Subject   string    `json:"subject,omitempty"`
	From      []Address `json:"from,omitempty"`
	Sender    []Address `json:"sender,omitempty"`
	ReplyTo   []Address `json:"reply_to,omitempty"`
	To        []Address `json:"to,omitempty"`
	Cc        []Address `json:"cc,omitempty"`
	Bcc       []Address `json:"bcc,omitempty"`
	InReplyTo string    `json:"in_reply_to,omitempty"`
	MessageID string    `json:"message_id,omitempty"`
}

// Param is one MIME parameter (attribute=value), in header order.
type Param struct {
	Name  string `json:"k"`
	Value string `json:"v"`
}

// Part is one node of the MIME tree. Offsets index the raw message bytes:
// [HeaderStart, BodyStart) is the part's header including the blank line
// that ends it, [BodyStart, End) its body.
type Part struct {
	Type        string   `json:"type"`              // lower case, e.g. "text"
	Subtype     string   `json:"subtype"`           // lower case, e.g. "plain"
	Params      []Param  `json:"params,omitempty"`  // Content-Type parameters
	ID          string   `json:"id,omitempty"`      // Content-ID
	Description string   `json:"desc,omitempty"`    // Content-Description
	Encoding    string   `json:"enc,omitempty"`     // Content-Transfer-Encoding, as written ("7bit" when absent)
	Size        int64    `json:"size"`              // body size in octets
	Lines       int64    `json:"lines,omitempty"`   // body lines, for text/* and message/rfc822
	MD5         string   `json:"md5,omitempty"`     // Content-MD5
	Disposition string   `json:"disp,omitempty"`    // lower case, e.g. "attachment"
	DispParams  []Param  `json:"dparams,omitempty"` // Content-Disposition parameters
	Language    []string `json:"lang,omitempty"`    // Content-Language
	Location    string   `json:"loc,omitempty"`     // Content-Location

	HeaderStart int64 `json:"hs"`
	BodyStart   int64 `json:"bs"`
	End         int64 `json:"end"`

	// Parts holds the children of a multipart/* part.
	Parts []*Part `json:"parts,omitempty"`
	// For message/rfc822 (and message/global): the enclosed message's
	// envelope and its top-level part (whose offsets index the same raw bytes).
	Envelope *Envelope `json:"env,omitempty"`
	Message  *Part     `json:"msg,omitempty"`
}

// Parsed is everything the store keeps about a message's content.
type Parsed struct {
	Envelope Envelope `json:"env"`
	// Body is the top-level part; Body.HeaderStart is 0 and Body.BodyStart is
	// the size of the message header.
	Body *Part `json:"body"`

	// Decoded, searchable forms (encoded words decoded to UTF-8).
	Subject    string    `json:"-"`
	From       string    `json:"-"` // all From addresses, "Name <a@b>, ..."
	To         string    `json:"-"`
	Cc         string    `json:"-"`
	Bcc        string    `json:"-"`
	References []string  `json:"-"` // message-ids from References, in order, without <>
	Date       time.Time `json:"-"` // parsed Date:, zero if absent or unparseable
}
