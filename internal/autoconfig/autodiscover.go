package autoconfig

import (
	"encoding/xml"
	"errors"
	"net/http"
)

// Namespaces of the POX Autodiscover protocol ([MS-OXDSCLI] §2.2).
const (
	nsResponse        = "http://schemas.microsoft.com/exchange/autodiscover/responseschema/2006"
	nsOutlookResponse = "http://schemas.microsoft.com/exchange/autodiscover/outlook/responseschema/2006a"
)

// adRequest is the request body; namespaces are not checked, only local
// names, as clients differ in what they send.
type adRequest struct {
	XMLName      xml.Name `xml:"Autodiscover"`
	EMailAddress string   `xml:"Request>EMailAddress"`
	Schema       string   `xml:"Request>AcceptableResponseSchema"`
}

type adResponse struct {
	XMLName  xml.Name       `xml:"http://schemas.microsoft.com/exchange/autodiscover/responseschema/2006 Autodiscover"`
	Response adOutlookReply `xml:"http://schemas.microsoft.com/exchange/autodiscover/outlook/responseschema/2006a Response"`
}

type adOutlookReply struct {
	Account adAccount `xml:"Account"`
}

type adAccount struct {
	AccountType string       `xml:"AccountType"`
	Action      string       `xml:"Action"`
	Protocols   []adProtocol `xml:"Protocol"`
}

type adProtocol struct {
	Type           string `xml:"Type"` // IMAP, POP3, SMTP
	Server         string `xml:"Server"`
	Port           int    `xml:"Port"`
	DomainRequired string `xml:"DomainRequired"`
	LoginName      string `xml:"LoginName"`
	SPA            string `xml:"SPA"`
	SSL            string `xml:"SSL"`
	// Encryption (SSL: implicit TLS, TLS: STARTTLS) overrides SSL in
	// clients that know it.
	Encryption   string `xml:"Encryption"`
	AuthRequired string `xml:"AuthRequired"`
	// UsePOPAuth: SMTP uses the same credentials as the incoming server.
	UsePOPAuth string `xml:"UsePOPAuth,omitempty"`
}

// serveAutodiscover answers the POX POST with the account's settings.
func (h *Handler) serveAutodiscover(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	body := http.MaxBytesReader(w, r.Body, MaxRequestBytes)
	var req adRequest
	if err := xml.NewDecoder(body).Decode(&req); err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			http.Error(w, "request too large", http.StatusRequestEntityTooLarge)
			return
		}
		http.Error(w, "malformed request", http.StatusBadRequest)
		return
	}
	domain, ok := splitAddress(req.EMailAddress)
	if !ok {
		http.Error(w, "malformed request", http.StatusBadRequest)
		return
	}
	if !h.domainServed(domain) {
		http.NotFound(w, r)
		return
	}
	c := h.cfg
	var ps []adProtocol
	add := func(typ string, port int, enc string) {
		if port == 0 {
			return
		}
		p := adProtocol{Type: typ, Server: c.Hostname, Port: port, DomainRequired: "off",
			LoginName: req.EMailAddress, SPA: "off", SSL: "on", Encryption: enc, AuthRequired: "on"}
		if typ == "SMTP" {
			p.UsePOPAuth = "on"
		}
		ps = append(ps, p)
	}
	add("IMAP", c.IMAPS, "SSL")
	add("IMAP", c.IMAP, "TLS")
	add("POP3", c.POP3S, "SSL")
	add("POP3", c.POP3, "TLS")
	add("SMTP", c.Submissions, "SSL")
	add("SMTP", c.Submission, "TLS")
	writeXML(w, adResponse{Response: adOutlookReply{Account: adAccount{
		AccountType: "email", Action: "settings", Protocols: ps,
	}}})
}
