package autoconfig

import (
	"encoding/xml"
	"net/http"
)

// The clientConfig document, version 1.1 (Thunderbird autoconfig).
type clientConfig struct {
	XMLName       xml.Name      `xml:"clientConfig"`
	Version       string        `xml:"version,attr"`
	EmailProvider emailProvider `xml:"emailProvider"`
	// SetupServer holds ManageSieve (draft-ietf-mailmaint-autoconfig:
	// a server section at the top level).
	SetupServer []server `xml:"setupServer"`
}

type emailProvider struct {
	ID               string   `xml:"id,attr"`
	Domains          []string `xml:"domain"`
	DisplayName      string   `xml:"displayName"`
	DisplayShortName string   `xml:"displayShortName"`
	Incoming         []server `xml:"incomingServer"`
	Outgoing         []server `xml:"outgoingServer"`
}

type server struct {
	Type           string `xml:"type,attr"`
	Hostname       string `xml:"hostname"`
	Port           int    `xml:"port"`
	SocketType     string `xml:"socketType"` // SSL, STARTTLS or plain
	Username       string `xml:"username"`
	Authentication string `xml:"authentication"`
}

// serveAutoconfig answers GET with the clientConfig for the domain of
// emailaddress (or of the Host).
func (h *Handler) serveAutoconfig(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	domain := h.requestDomain(r)
	if !h.domainServed(domain) {
		http.NotFound(w, r)
		return
	}
	c := h.cfg
	// %EMAILADDRESS% is a placeholder Thunderbird replaces with what the
	// user typed: the login name is the full address.
	user := "%EMAILADDRESS%"
	add := func(list []server, typ string, port int, socket string) []server {
		if port == 0 {
			return list
		}
		return append(list, server{Type: typ, Hostname: c.Hostname, Port: port, SocketType: socket,
			Username: user, Authentication: "password-cleartext"})
	}
	var in, out []server
	in = add(in, "imap", c.IMAPS, "SSL")
	in = add(in, "imap", c.IMAP, "STARTTLS")
	in = add(in, "pop3", c.POP3S, "SSL")
	in = add(in, "pop3", c.POP3, "STARTTLS")
	out = add(out, "smtp", c.Submissions, "SSL")
	out = add(out, "smtp", c.Submission, "STARTTLS")
	setup := add(nil, "managesieve", c.ManageSieve, "STARTTLS")
	writeXML(w, clientConfig{
		SetupServer: setup,
		Version:     "1.1",
		EmailProvider: emailProvider{
			ID:               domain,
			Domains:          []string{domain},
			DisplayName:      domain + " mail (" + c.Hostname + ")",
			DisplayShortName: domain,
			Incoming:         in,
			Outgoing:         out,
		},
	})
}
