package admin

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// pageData is what every page template gets; Data is the page's own.
type pageData struct {
	Title  string
	Nav    string // the current section, for the menu
	Host   string
	User   string
	CSRF   string
	Error  string
	Notice string
	Data   any
}

// templates holds, per page, the layout parsed together with the page.
type templates struct{ pages map[string]*template.Template }

var funcs = template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.Local().Format("2006-01-02 15:04:05")
	},
	"bytes": func(n int64) string {
		switch {
		case n >= 1<<30:
			return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
		case n >= 1<<20:
			return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
		case n >= 1<<10:
			return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
		}
		return fmt.Sprintf("%d B", n)
	},
	"orNull": func(s string) string {
		if s == "" {
			return "<>"
		}
		return s
	},
	"join": strings.Join,
}

func mustTemplates() *templates {
	t, err := parseTemplates()
	if err != nil {
		panic(err) // the templates are embedded; tests parse them
	}
	return t
}

func parseTemplates() (*templates, error) {
	layout, err := template.New("layout").Funcs(funcs).ParseFS(templateFS, "templates/_layout.html")
	if err != nil {
		return nil, fmt.Errorf("admin templates: %w", err)
	}
	files, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("admin templates: %w", err)
	}
	t := &templates{pages: map[string]*template.Template{}}
	for _, f := range files {
		name := strings.TrimSuffix(path.Base(f), ".html")
		if strings.HasPrefix(name, "_") {
			continue
		}
		c, err := layout.Clone()
		if err != nil {
			return nil, fmt.Errorf("admin templates: %w", err)
		}
		if _, err := c.ParseFS(templateFS, f); err != nil {
			return nil, fmt.Errorf("admin template %s: %w", f, err)
		}
		t.pages[name] = c
	}
	return t, nil
}

// render executes a page into memory first, so an error never sends half
// a page.
func (t *templates) render(w io.Writer, name string, data pageData) error {
	p, ok := t.pages[name]
	if !ok {
		return fmt.Errorf("admin: no template %q", name)
	}
	var buf bytes.Buffer
	if err := p.ExecuteTemplate(&buf, "page", data); err != nil {
		return fmt.Errorf("admin: render %s: %w", name, err)
	}
	_, err := w.Write(buf.Bytes())
	return err
}

// page renders a page for a logged-in administrator with the given status.
func (s *Server) page(w http.ResponseWriter, r *http.Request, sess *session, code int, name string, d pageData) {
	d.Host, d.User, d.CSRF = s.cfg.Hostname, sess.Address, sess.CSRF
	if d.Nav == "" {
		d.Nav = name
	}
	if d.Notice == "" {
		d.Notice = notices[r.URL.Query().Get("done")]
	}
	var buf bytes.Buffer
	if err := s.tmpl.render(&buf, name, d); err != nil {
		s.httpError(w, r, http.StatusInternalServerError, "The page could not be shown.", err)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// notices are the fixed messages a redirect after a successful action can
// ask for (?done=KEY); the query never puts its own text on the page.
var notices = map[string]string{
	"domain-added":     "The domain was added.",
	"domain-removed":   "The domain was removed.",
	"account-added":    "The account was created.",
	"account-removed":  "The account and its mail were removed.",
	"sieve-reset":      "The account's filters were reset.",
	"password-set":     "The password was changed.",
	"account-disabled": "The account was disabled.",
	"account-enabled":  "The account was enabled.",
	"admin-set":        "The account is now an administrator.",
	"admin-unset":      "The account is no longer an administrator.",
	"alias-added":      "The alias was saved.",
	"alias-removed":    "The alias was removed.",
	"queue-retried":    "The message will be retried now.",
	"queue-dropped":    "The message was removed from the queue.",
}

// done redirects after a successful POST (post/redirect/get).
func done(w http.ResponseWriter, r *http.Request, where, key string) {
	http.Redirect(w, r, Prefix+where+"?done="+key, http.StatusSeeOther)
}

// staticHandler serves the embedded stylesheet.
func staticHandler() http.Handler {
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic(err)
	}
	fsrv := http.FileServerFS(sub)
	return http.StripPrefix(Prefix+"static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		fsrv.ServeHTTP(w, r)
	}))
}
