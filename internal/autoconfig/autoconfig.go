// Package autoconfig tells mail clients how to reach the server, so that a
// user only types an address and a password:
//
//   - Thunderbird's autoconfig (the "clientConfig" format, version 1.1,
//     described at wiki.mozilla.org/Thunderbird:Autoconfiguration): GET
//     /.well-known/autoconfig/mail/config-v1.1.xml and
//     /mail/config-v1.1.xml?emailaddress=user@example.org, served on
//     autoconfig.<domain>;
//   - Outlook's Autodiscover, the plain-old-XML (POX) protocol of
//     [MS-OXDSCLI]: POST /autodiscover/autodiscover.xml (also
//     /Autodiscover/Autodiscover.xml) with an EMailAddress, answered with
//     the "outlookmessagesaccount" response schema, served on
//     autodiscover.<domain>.
//
// Both list IMAP (993 implicit TLS, 143 STARTTLS), POP3 (995, 110) and SMTP
// submission (465 implicit TLS, 587 STARTTLS), all on the configured host
// name, with password authentication; Thunderbird's document also lists
// ManageSieve (4190, STARTTLS) as the <setupServer type="managesieve"> of
// the IETF draft of the format (draft-ietf-mailmaint-autoconfig), which
// clients that do not know it ignore. A port of 0 leaves that service out.
//
// Every value taken from the request is encoded by encoding/xml, request
// bodies are limited to MaxRequestBytes, and addresses outside the served
// domains get 404, so the handler reveals nothing about other domains.
package autoconfig

import (
	"encoding/xml"
	"net/http"
	"strings"
)

// MaxRequestBytes bounds an Autodiscover request body.
const MaxRequestBytes = 16 << 10

// Config says what to announce.
type Config struct {
	// Hostname is the server's name, as in its TLS certificate.
	Hostname string
	// Domains returns the mail domains served (called on each request, so
	// domains added at run time are seen). Nil serves any domain.
	Domains func() []string
	// Ports; 0 leaves the service out.
	IMAPS, IMAP, POP3S, POP3, Submissions, Submission, ManageSieve int
}

// Handler serves the autoconfig and Autodiscover documents.
type Handler struct {
	cfg Config
	mux *http.ServeMux
}

// New returns the handler.
func New(cfg Config) *Handler {
	h := &Handler{cfg: cfg, mux: http.NewServeMux()}
	h.mux.HandleFunc("/.well-known/autoconfig/mail/config-v1.1.xml", h.serveAutoconfig)
	h.mux.HandleFunc("/mail/config-v1.1.xml", h.serveAutoconfig)
	h.mux.HandleFunc("/autodiscover/autodiscover.xml", h.serveAutodiscover)
	h.mux.HandleFunc("/Autodiscover/Autodiscover.xml", h.serveAutodiscover)
	return h
}

// Paths are the URL paths the handler answers, for mounting it on a mux.
var Paths = []string{
	"/.well-known/autoconfig/mail/config-v1.1.xml",
	"/mail/config-v1.1.xml",
	"/autodiscover/autodiscover.xml",
	"/Autodiscover/Autodiscover.xml",
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mux.ServeHTTP(w, r)
}

// domainServed reports whether the domain (lower case) is one of ours.
func (h *Handler) domainServed(domain string) bool {
	if domain == "" {
		return false
	}
	if h.cfg.Domains == nil {
		return true
	}
	for _, d := range h.cfg.Domains() {
		if strings.EqualFold(d, domain) {
			return true
		}
	}
	return false
}

// splitAddress returns the lower-cased domain of an address, or "" when
// the address is not local@domain.
func splitAddress(addr string) (string, bool) {
	at := strings.LastIndexByte(addr, '@')
	if at <= 0 || at == len(addr)-1 || len(addr) > 320 || strings.ContainsAny(addr, " \t\r\n<>") {
		return "", false
	}
	return strings.ToLower(addr[at+1:]), true
}

// requestDomain is the domain a Thunderbird request is about: from
// emailaddress, else from the Host ("autoconfig.example.org").
func (h *Handler) requestDomain(r *http.Request) string {
	if a := r.URL.Query().Get("emailaddress"); a != "" {
		d, ok := splitAddress(a)
		if !ok {
			return ""
		}
		return d
	}
	host := strings.ToLower(r.Host)
	if i := strings.LastIndexByte(host, ':'); i >= 0 && !strings.Contains(host[i:], "]") {
		host = host[:i]
	}
	return strings.TrimPrefix(host, "autoconfig.")
}

// writeXML sends v as an XML document.
func writeXML(w http.ResponseWriter, v any) {
	out, err := xml.MarshalIndent(v, "", "  ")
	if err != nil {
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/xml; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write([]byte(xml.Header))
	w.Write(out)
	w.Write([]byte("\n"))
}
