package smtpserver

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"syscall"

	"pimail/internal/delivery"
	"pimail/internal/directory"
)

// reply is one SMTP reply: its code (RFC 5321 §4.2), enhanced code (RFC
// 3463) and text. The text never carries configuration or internal errors;
// those go to the log.
type reply struct {
	code int
	enh  [3]int
	text string
}

func newReply(code int, enh [3]int, text string) *reply {
	return &reply{code: code, enh: enh, text: text}
}

// appendTo writes "code sep x.y.z text CRLF"; a reply without an enhanced
// code (354, RFC 2034 §3: it is not a completion reply) is "code sep text".
func (r *reply) appendTo(b []byte, sep byte) []byte {
	b = strconv.AppendInt(b, int64(r.code), 10)
	b = append(b, sep)
	if r.enh[0] == 0 {
		b = append(b, r.text...)
		return append(b, '\r', '\n')
	}
	b = strconv.AppendInt(b, int64(r.enh[0]), 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, int64(r.enh[1]), 10)
	b = append(b, '.')
	b = strconv.AppendInt(b, int64(r.enh[2]), 10)
	b = append(b, ' ')
	b = append(b, r.text...)
	return append(b, '\r', '\n')
}

// line is the reply as the one line sent in place of a greeting: the
// server's name follows the codes (RFC 5321 §4.2, §3.1).
func (r *reply) line(host string) string {
	return fmt.Sprintf("%d %d.%d.%d %s %s\r\n", r.code, r.enh[0], r.enh[1], r.enh[2], host, r.text)
}

var (
	replyOK       = newReply(250, [3]int{2, 0, 0}, "OK")
	replySenderOK = newReply(250, [3]int{2, 1, 0}, "Sender OK")
	replyRcptOK   = newReply(250, [3]int{2, 1, 5}, "Recipient OK")
	replyNoop     = newReply(250, [3]int{2, 0, 0}, "I have done nothing")
	replyReset    = newReply(250, [3]int{2, 0, 0}, "Reset")
	replyBye      = newReply(221, [3]int{2, 0, 0}, "Bye")
	replyStartTLS = newReply(220, [3]int{2, 0, 0}, "Ready to start TLS")
	replyData     = &reply{code: 354, text: "Start mail input; end with <CRLF>.<CRLF>"}
	// RFC 5321 §3.5.3: 252 when the server will not verify but will try.
	replyVRFY = newReply(252, [3]int{2, 5, 0}, "Cannot VRFY user, but will accept message and attempt delivery")
	replyHelp = newReply(214, [3]int{2, 0, 0}, "See RFC 5321; commands: EHLO HELO MAIL RCPT DATA BDAT RSET NOOP QUIT VRFY HELP STARTTLS AUTH")

	// Syntax and sequence (RFC 5321 §4.2.2, §4.3.2).
	replyUnknownCommand = newReply(500, [3]int{5, 5, 2}, "Command not recognized")
	replyLineTooLong    = newReply(500, [3]int{5, 5, 2}, "Line too long")
	replySyntax         = newReply(501, [3]int{5, 5, 4}, "Syntax error in parameters or arguments")
	replyHeloSyntax     = newReply(501, [3]int{5, 5, 4}, "Domain or address literal required")
	replyNotImpl        = newReply(502, [3]int{5, 5, 1}, "Command not implemented")
	replyHeloFirst      = newReply(503, [3]int{5, 5, 1}, "Send EHLO or HELO first")
	replyNestedMail     = newReply(503, [3]int{5, 5, 1}, "Sender already given; RSET first")
	replyMailFirst      = newReply(503, [3]int{5, 5, 1}, "MAIL first")
	replyRcptFirst      = newReply(503, [3]int{5, 5, 1}, "RCPT first")
	replyBDATMixed      = newReply(503, [3]int{5, 5, 1}, "DATA after BDAT; RSET first")
	replyAlreadyTLS     = newReply(503, [3]int{5, 5, 1}, "TLS already active")
	replyNoTLS          = newReply(502, [3]int{5, 5, 1}, "STARTTLS not available")
	replyParam          = newReply(555, [3]int{5, 5, 4}, "Parameter not recognized or not implemented")
	replyBadAddress     = newReply(553, [3]int{5, 1, 3}, "Bad address syntax")
	replyNeedUTF8       = newReply(553, [3]int{5, 6, 7}, "Non-ASCII address needs SMTPUTF8")

	// Limits.
	replyTooBig         = newReply(552, [3]int{5, 3, 4}, "Message size exceeds fixed limit")
	replyTooManyRcpts   = newReply(452, [3]int{4, 5, 3}, "Too many recipients")
	replyTooManyErrors  = newReply(421, [3]int{4, 7, 0}, "Too many errors, closing connection")
	replyTimeout        = newReply(421, [3]int{4, 4, 2}, "Timeout, closing connection")
	replyShuttingDown   = newReply(421, [3]int{4, 3, 2}, "Service shutting down, try again later")
	replyTooManyConns   = newReply(421, [3]int{4, 7, 0}, "Too many connections, try again later")
	replyTooManyConnsIP = newReply(421, [3]int{4, 7, 0}, "Too many connections from your address, try again later")
	replyRateLimit      = newReply(421, [3]int{4, 7, 0}, "Connection rate limit exceeded, try again later")
	replyDataUnreadable = newReply(451, [3]int{4, 4, 2}, "Message data not received, try again later")
	replySmuggling      = newReply(554, [3]int{5, 5, 2}, "Message refused: a line of a single dot between line breaks other than CRLF (RFC 5321 §4.1.1.4)")
	replyPregreet       = newReply(554, [3]int{5, 7, 1}, "Protocol error: data sent before the greeting")
	replyNoValidRcpts   = newReply(554, [3]int{5, 5, 1}, "No valid recipients")
	replyTempFailure    = newReply(451, [3]int{4, 3, 0}, "Temporary local problem, please try again later")
	replyNoStorage      = newReply(452, [3]int{4, 3, 1}, "Insufficient system storage, please try again later")
	// The recipients vanished between RCPT and the end of data.
	replyNoRecipients = newReply(554, [3]int{5, 1, 1}, "No valid recipients")

	// Recipients and senders.
	replyNoSuchUser  = newReply(550, [3]int{5, 1, 1}, "No such user here")
	replyRelayDenied = newReply(550, [3]int{5, 7, 1}, "Relaying denied")
)

// replyBlocklisted refuses a client listed in blocklists: 554 5.7.1 as
// Postfix sends it, naming the lists (public names the client can look up
// itself) and nothing else.
func replyBlocklisted(ip string, zones []string) *reply {
	return newReply(554, [3]int{5, 7, 1}, fmt.Sprintf("Service unavailable; client [%s] blocked using %s", ip, strings.Join(zones, ", ")))
}

// rcptError maps a directory answer to the RCPT reply.
func rcptError(err error) *reply {
	switch {
	case errors.Is(err, directory.ErrUnknownUser):
		return replyNoSuchUser
	case errors.Is(err, directory.ErrNotLocalDomain):
		return replyRelayDenied
	default:
		return replyTempFailure
	}
}

// deliveryError maps a pipeline error to the reply after the message data.
func deliveryError(err error) *reply {
	var re *delivery.RejectError
	switch {
	case errors.As(err, &re): // a filter's verdict: its reply text is meant for the client
		return newReply(re.Code, re.Enhanced, re.Message)
	case errors.Is(err, delivery.ErrNoRecipients):
		return replyNoRecipients
	case errors.Is(err, syscall.ENOSPC): // a message file or the database could not grow
		return replyNoStorage
	default: // store failures, ErrForwardingUnavailable: the sender retries
		return replyTempFailure
	}
}

// replyAccepted is the positive reply after the message data; it names
// the message's ID, which the logs use too.
func replyAccepted(verb, id string) *reply {
	return newReply(250, [3]int{2, 0, 0}, "OK: "+verb+" as "+id)
}

// logText is the reply as the delivery log shows it: "550 5.1.1 text".
func (r *reply) logText() string {
	return strings.TrimSuffix(string(r.appendTo(nil, ' ')), "\r\n")
}
