package webmail

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"strconv"
	"strings"
	"sync"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// templates holds one template set per page, each the base layout plus the
// page's own file.
type templates struct {
	pages map[string]*template.Template
}

var funcs = template.FuncMap{
	"add": func(a, b int) int { return a + b },
	"sub": func(a, b int) int { return a - b },
}

func mustTemplates() *templates {
	t, err := parseTemplates()
	if err != nil {
		panic(err) // embedded templates are fixed at build time; tests parse them
	}
	return t
}

func parseTemplates() (*templates, error) {
	base, err := template.New("base").Funcs(funcs).ParseFS(templateFS, "templates/_*.html")
	if err != nil {
		return nil, fmt.Errorf("webmail templates: %w", err)
	}
	files, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("webmail templates: %w", err)
	}
	t := &templates{pages: map[string]*template.Template{}}
	for _, f := range files {
		name := strings.TrimSuffix(path.Base(f), ".html")
		if strings.HasPrefix(name, "_") {
			continue
		}
		c, err := base.Clone()
		if err != nil {
			return nil, fmt.Errorf("webmail templates: %w", err)
		}
		if _, err := c.ParseFS(templateFS, f); err != nil {
			return nil, fmt.Errorf("webmail template %s: %w", f, err)
		}
		t.pages[name] = c
	}
	return t, nil
}

var bufPool = sync.Pool{New: func() any { return new(bytes.Buffer) }}

// render executes the page into a buffer first, so a template error never
// leaves half a page.
func (t *templates) render(w http.ResponseWriter, name string, data any) error {
	p, ok := t.pages[name]
	if !ok {
		return fmt.Errorf("webmail: no template %q", name)
	}
	buf := bufPool.Get().(*bytes.Buffer)
	buf.Reset()
	defer bufPool.Put(buf)
	if err := p.ExecuteTemplate(buf, "page", data); err != nil {
		return fmt.Errorf("webmail: render %s: %w", name, err)
	}
	out := buf
	if sp, ok := data.(splicer); ok {
		if slot, text := sp.spliced(); slot != "" {
			if i := bytes.Index(buf.Bytes(), []byte(slot)); i >= 0 {
				out = bufPool.Get().(*bytes.Buffer)
				out.Reset()
				defer bufPool.Put(out)
				out.Grow(buf.Len() - len(slot) + len(text))
				out.Write(buf.Bytes()[:i])
				out.WriteString(text)
				out.Write(buf.Bytes()[i+len(slot):])
			}
		}
	}
	// The whole page in one write with its length: net/http then sends it
	// in one or two system calls, not chunked through its 2 KiB buffer
	// (docs/benchmarks.md).
	w.Header().Set("Content-Length", strconv.Itoa(out.Len()))
	_, err := w.Write(out.Bytes())
	return err
}

// splicer is page data with a pre-rendered part that render writes in
// place of a slot comment (readData's plain text body).
type splicer interface {
	spliced() (slot, text string)
}

// page renders a full page with status 200.
func (s *Server) page(w http.ResponseWriter, r *http.Request, name string, data any) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	if err := s.tmpl.render(w, name, data); err != nil {
		s.logError(r, "render", "page", name, "err", err)
	}
}

// staticHandler serves the embedded CSS and JavaScript.
func staticHandler() http.Handler {
	sub, err := fs.Sub(staticFS, "static")
	if err != nil {
		panic(err)
	}
	fsrv := http.FileServerFS(sub)
	return http.StripPrefix("/static/", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Cache-Control", "public, max-age=3600")
		fsrv.ServeHTTP(w, r)
	}))
}
