package console

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"net/url"
	"path"
	"time"
)

var (
	//go:embed templates/*.html
	templates embed.FS
	//go:embed static
	assets embed.FS
)

// pages are the page templates by file name, each parsed with the layout.
type pages map[string]*template.Template

func parsePages() (pages, error) {
	names, err := fs.Glob(templates, "templates/*.html")
	if err != nil {
		return nil, err
	}
	p := pages{}
	for _, name := range names {
		base := path.Base(name)
		if base == "layout.html" {
			continue
		}
		t, err := template.New(base).Funcs(funcs).ParseFS(templates, "templates/layout.html", name)
		if err != nil {
			return nil, fmt.Errorf("console: template %s: %w", base, err)
		}
		p[base] = t
	}
	return p, nil
}

// view is what every page template gets: the page's own data in Data.
type view struct {
	Base, Title, CSRF, Who string
	ReadOnly, SignedIn     bool
	Now                    time.Time
	Data                   any
}

// render writes the page name with data, with status. It renders into a
// buffer first, so that a template error is a clean 500.
func (h *Handler) render(w http.ResponseWriter, r *http.Request, status int, name, title string, data any) error {
	v := view{
		Base: basePath(r), Title: title, CSRF: h.csrfToken(w, r), Who: who(r),
		ReadOnly: h.cfg.ReadOnly, SignedIn: who(r) != "", Now: time.Now(), Data: data,
	}
	var buf bytes.Buffer
	if err := h.pages[name].ExecuteTemplate(&buf, "layout", v); err != nil {
		h.cfg.Logger.Error("console: render", "page", name, "error", err)
		http.Error(w, "the page could not be rendered", http.StatusInternalServerError)
		return nil
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = buf.WriteTo(w)
	return nil
}

var funcs = template.FuncMap{
	"age":   age,
	"utc":   func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05.000 UTC") },
	"esc":   url.PathEscape,
	"chart": newChart,
	"dur":   func(d time.Duration) string { return d.Round(time.Millisecond).String() },
	"pct": func(part, whole int64) int64 {
		if whole <= 0 {
			return 100
		}
		return min(100*part/whole, 100)
	},
}

// age says how long ago t was, in the largest unit that fits.
func age(t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	d := time.Since(t)
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds ago", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm ago", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh ago", int(d.Hours()))
	}
	return fmt.Sprintf("%dd ago", int(d.Hours()/24))
}
