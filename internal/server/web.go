package server

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"pimail/internal/autoconfig"
	"pimail/internal/metrics"
	"pimail/internal/store"
)

// mtaSTSPolicy serves the MTA-STS policy (RFC 8461 §3.2) of the domain
// named by the request's host, mta-sts.DOMAIN, as the store keeps it
// (`pimail quickstart` and `pimail domain mta-sts` set it).
func mtaSTSPolicy(st store.MTASTSPolicies, logger *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host := strings.ToLower(r.Host)
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		domain, ok := strings.CutPrefix(host, "mta-sts.")
		if !ok || domain == "" {
			http.NotFound(w, r)
			return
		}
		policy, err := st.MTASTSPolicy(r.Context(), domain)
		if err != nil {
			if !errors.Is(err, store.ErrNotFound) && !errors.Is(err, store.ErrInvalid) {
				logger.Error("MTA-STS policy", "domain", domain, "err", err)
				http.Error(w, "the policy cannot be read now", http.StatusServiceUnavailable)
				return
			}
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, policy)
	})
}

// loopbackOnly serves h to loopback clients only: the metrics reveal
// traffic volumes and are for a local Prometheus or an SSH tunnel.
func loopbackOnly(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !fromLoopback(r) {
			http.NotFound(w, r)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// webServer serves HTTP handlers on a listener with timeouts against slow
// clients. The event stream clears its own write deadline.
type webServer struct{ srv *http.Server }

func newWebServer(h http.Handler, logger *slog.Logger) *webServer {
	return &webServer{srv: &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       5 * time.Minute, // uploads of large attachments
		WriteTimeout:      5 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelDebug),
	}}
}

func (w *webServer) Serve(ln net.Listener) error { return w.srv.Serve(ln) }
func (w *webServer) Close() error                { return w.srv.Close() }

// redirectToHTTPS is the plain-HTTP listener's handler when an HTTPS
// listener is configured: it answers ACME HTTP-01 challenges (RFC 8555
// §8.3) and autoconfig (mail clients look there first), keeps the
// metrics for a local scraper, and sends everything else to the same
// path over HTTPS with a permanent redirect (RFC 9110 §15.4.9), so that
// no page that takes a password is ever served in the clear.
func redirectToHTTPS(httpsAddr string, auto http.Handler, acme http.Handler) http.Handler {
	p := port(httpsAddr)
	mux := http.NewServeMux()
	for _, path := range autoconfig.Paths {
		mux.Handle(path, auto)
	}
	mux.Handle("/metrics", loopbackOnly(metrics.Handler()))
	if acme != nil {
		mux.Handle("/.well-known/acme-challenge/", acme)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		host := r.Host
		if h, _, err := net.SplitHostPort(host); err == nil {
			host = h
		}
		host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
		if host == "" || strings.ContainsAny(host, "/\\@") {
			http.Error(w, "use HTTPS", http.StatusBadRequest)
			return
		}
		if p != 443 && p != 0 {
			host = net.JoinHostPort(host, strconv.Itoa(p))
		} else if strings.Contains(host, ":") {
			host = "[" + host + "]"
		}
		http.Redirect(w, r, "https://"+host+r.URL.RequestURI(), http.StatusPermanentRedirect)
	})
	return mux
}

// refusePlainLogins guards a plain-HTTP listener when there is no HTTPS
// one: a login (webmail or admin) is refused unless the client is on
// loopback, which is a browser on the machine itself or a local reverse
// proxy that terminated TLS. The TCP peer decides, not a forwarded-for
// header.
func refusePlainLogins(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && (r.URL.Path == "/login" || r.URL.Path == "/admin/login") && !fromLoopback(r) {
			http.Error(w, "Logins over plain HTTP are refused: use HTTPS.", http.StatusForbidden)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// fromLoopback reports whether the request's TCP peer is a loopback
// address.
func fromLoopback(r *http.Request) bool {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	ip := net.ParseIP(host)
	return err == nil && ip != nil && ip.IsLoopback()
}
