package server

import (
	"log/slog"

	"pimail/internal/config"
)

// fdReserve is the file descriptors kept out of the connection limits:
// the database and its WAL, message files being written and read, the
// spool, DNS and clamd sockets, outbound SMTP connections.
const fdReserve = 256

// fitConnectionLimits keeps the listeners' connection limits within the
// process's file descriptor limit (RLIMIT_NOFILE, which Go raises to the
// hard limit at start). When their sum does not fit, every limit is
// scaled down in proportion and a warning says so: a flood that fills one
// listener to its limit then still leaves descriptors for the others and
// for the store, instead of making accept fail with EMFILE everywhere.
// Limits that are off (negative) cannot be fitted; that is logged too.
func fitConnectionLimits(cfg *config.Config, logger *slog.Logger) {
	nofile, ok := fileLimit()
	if !ok {
		return
	}
	budget := int(nofile) - fdReserve
	type lim struct {
		name string
		v    *int
	}
	var lims []lim
	on := func(name string, addr bool, v *int) {
		if addr {
			lims = append(lims, lim{name, v})
		}
	}
	l := cfg.Listen
	on("smtp.max_connections", l.SMTP != "", &cfg.SMTP.MaxConnections)
	on("submission.max_connections", l.Submission != "" || l.Submissions != "", &cfg.Submission.MaxConnections)
	on("imap.max_connections", l.IMAP != "" || l.IMAPS != "", &cfg.IMAP.MaxConnections)
	on("pop3.max_connections", l.POP3 != "" || l.POP3S != "", &cfg.POP3.MaxConnections)
	on("sieve.max_connections", l.ManageSieve != "", &cfg.Sieve.MaxConnections)
	on("http.max_connections (http)", l.HTTP != "", &cfg.HTTP.MaxConnections)
	on("http.max_connections (https)", l.HTTPS != "", &cfg.HTTP.MaxConnections)
	sum := 0
	for _, x := range lims {
		if *x.v < 0 {
			logger.Warn("a listener has no connection limit: a flood of connections can exhaust file descriptors", "key", x.name)
			return
		}
		sum += *x.v
	}
	if budget <= 0 || sum <= budget {
		return
	}
	seen := map[*int]bool{}
	for _, x := range lims {
		if seen[x.v] {
			continue
		}
		seen[x.v] = true
		old := *x.v
		*x.v = max(1, old*budget/sum)
		logger.Warn("connection limit lowered to fit the file descriptor limit", "key", x.name, "from", old, "to", *x.v, "nofile", nofile)
	}
}
