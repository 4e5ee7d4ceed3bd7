package smtpd

import (
	"errors"
	"fmt"
	"strings"
	"syscall"

	"github.com/emersion/go-smtp"

	"pimail/internal/delivery"
	"pimail/internal/directory"
)

// Replies this server sends. Reply codes follow RFC 5321 §4.2, enhanced
// codes RFC 3463. The text never carries configuration or internal errors;
// those go to the log.
var (
	// RFC 3463 X.1.1: bad destination mailbox address.
	replyNoSuchUser = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "No such user here"}
	// RFC 5321 §3.6.2: relaying is refused; X.7.1 delivery not authorized.
	replyRelayDenied = &smtp.SMTPError{Code: 550, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "Relaying denied"}
	// RFC 5321 §4.2.3: 452 insufficient system storage; RFC 3463 X.3.1:
	// mail system full. Temporary: the sender retries once space is back.
	replyNoStorage = &smtp.SMTPError{Code: 452, EnhancedCode: smtp.EnhancedCode{4, 3, 1}, Message: "Insufficient system storage, please try again later"}
	// X.3.0: other or undefined mail system status.
	replyTempFailure = &smtp.SMTPError{Code: 451, EnhancedCode: smtp.EnhancedCode{4, 3, 0}, Message: "Temporary local problem, please try again later"}
	// RFC 5321 §3.8: 421 closes the session.
	replyTooManyErrors = &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 7, 0}, Message: "Too many errors, closing connection"}
	// X.3.2: system not accepting network messages.
	replyShuttingDown = &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 3, 2}, Message: "Service shutting down, try again later"}
	// RFC 1870 §6.3 with X.3.4: message too big for system.
	replyLineTooLong = &smtp.SMTPError{Code: 500, EnhancedCode: smtp.EnhancedCode{5, 5, 2}, Message: "Line too long"}
	replyTooBig      = &smtp.SMTPError{Code: 552, EnhancedCode: smtp.EnhancedCode{5, 3, 4}, Message: "Message size exceeds fixed limit"}
	// RFC 5321 §2.3.8: CR and LF only as CRLF; bare ones are refused
	// because they are how SMTP smuggling hides a second message.
	replyBareLineEnding = &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 5, 2}, Message: "Message rejected: bare CR or LF in message data"}
	// RFC 5321 §3.1 and §4.2.2: 421 closes the channel; X.7.0 is a
	// security or policy status (RFC 3463 §3.8).
	replyTooManyConns   = &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 7, 0}, Message: "Too many connections, try again later"}
	replyTooManyConnsIP = &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 7, 0}, Message: "Too many connections from your address, try again later"}
	replyRateLimit      = &smtp.SMTPError{Code: 421, EnhancedCode: smtp.EnhancedCode{4, 7, 0}, Message: "Connection rate limit exceeded, try again later"}
	// A client that talks before the greeting (RFC 5321 §4.3.1) is not
	// a conforming SMTP client; X.7.1: delivery not authorized.
	replyPregreet = &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 7, 1}, Message: "Protocol error: data sent before the greeting"}
	// The recipients vanished between RCPT and the end of data.
	replyNoRecipients = &smtp.SMTPError{Code: 554, EnhancedCode: smtp.EnhancedCode{5, 1, 1}, Message: "No valid recipients"}
)

// replyBlocklisted refuses a client listed in blocklists: 554 5.7.1 as
// postfix sends it, naming the lists (public names the client can look up
// itself) and nothing else.
func replyBlocklisted(ip string, zones []string) *smtp.SMTPError {
	return &smtp.SMTPError{
		Code: 554, EnhancedCode: smtp.EnhancedCode{5, 7, 1},
		Message: fmt.Sprintf("Service unavailable; client [%s] blocked using %s", ip, strings.Join(zones, ", ")),
	}
}

// rcptError maps a directory answer to the RCPT reply.
func rcptError(err error) *smtp.SMTPError {
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
func deliveryError(err error) *smtp.SMTPError {
	var re *delivery.RejectError
	switch {
	case errors.As(err, &re): // a filter's verdict: its reply text is meant for the client
		return &smtp.SMTPError{Code: re.Code, EnhancedCode: smtp.EnhancedCode(re.Enhanced), Message: re.Message}
	case errors.Is(err, delivery.ErrNoRecipients):
		return replyNoRecipients
	case errors.Is(err, syscall.ENOSPC): // a message file or the database could not grow
		return replyNoStorage
	default: // store failures, ErrForwardingUnavailable: the sender retries
		return replyTempFailure
	}
}

// replyAccepted is the positive reply after the message data. go-smtp
// sends a fixed "queued" text for a nil error; an SMTPError with a 2xx code
// is written as given, which lets the reply name the message ID.
func replyAccepted(id string) *smtp.SMTPError {
	return &smtp.SMTPError{Code: 250, EnhancedCode: smtp.EnhancedCode{2, 0, 0}, Message: fmt.Sprintf("OK: delivered as %s", id)}
}
