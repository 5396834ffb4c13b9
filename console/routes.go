package console

import (
	"errors"
	"io/fs"
	"net/http"
)

// route is one page or action of the console.
type route struct {
	pattern string // http.ServeMux's
	// action marks a request that changes something: a POST that needs
	// the CSRF token, and is refused in read-only mode.
	action bool
	handle func(w http.ResponseWriter, r *http.Request) error
}

func (h *Handler) routes() []route {
	return []route{
		{pattern: "GET /{$}", handle: h.overviewPage},
		{pattern: "GET /groups/{group}", handle: h.groupPage},
		{pattern: "GET /groups/{group}/letters", handle: h.lettersPage},
		{pattern: "GET /groups/{group}/letters/{partition}/{offset}", handle: h.letterPage},
		{pattern: "POST /groups/{group}/replay", action: true, handle: h.plan(kindReplay)},
		{pattern: "POST /groups/{group}/discard", action: true, handle: h.plan(kindDiscard)},
		{pattern: "GET /replays", handle: h.replaysPage},
		{pattern: "GET /replays/{id}", handle: h.replayPage},
		{pattern: "GET /replays/{id}/status", handle: h.replayStatus},
		{pattern: "POST /replays/{id}/start", action: true, handle: h.startReplay},
		{pattern: "GET /parked/{group}", handle: h.parkedPage},
		{pattern: "POST /parked/{group}/{id}/run", action: true, handle: h.runParked},
		{pattern: "POST /parked/{group}/{id}/dead-letter", action: true, handle: h.deadLetterParked},
	}
}

// errReadOnly refuses an action in read-only mode.
var errReadOnly = &httpError{code: http.StatusForbidden, msg: "the console is read-only: it replays, discards, runs and dead-letters nothing"}

// mux routes the requests to the pages, actions and assets.
func (h *Handler) mux() *http.ServeMux {
	mux := http.NewServeMux()
	for _, rt := range h.routes() {
		handle := rt.handle
		if rt.action && h.cfg.ReadOnly {
			handle = func(http.ResponseWriter, *http.Request) error { return errReadOnly }
		} else if rt.action {
			handle = h.checkCSRF(handle)
		}
		mux.Handle(rt.pattern, h.page(handle))
	}
	static, _ := fs.Sub(assets, "static")
	mux.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	if len(h.cfg.Tokens) > 0 {
		mux.Handle("GET /login", h.page(h.loginPage))
		mux.Handle("POST /login", h.page(h.checkCSRF(h.login)))
		mux.Handle("POST /logout", h.page(h.checkCSRF(h.logout)))
	}
	if h.metrics != nil {
		mux.Handle("GET /metrics", h.metrics)
	}
	return mux
}

// guard puts every request through the token check, the browsers'
// cross-origin check and the security headers.
func (h *Handler) guard(next http.Handler) http.Handler {
	cop := http.NewCrossOriginProtection()
	return securityHeaders(cop.Handler(h.requireToken(next)))
}

// page serves handle, showing the error it returns as a page.
func (h *Handler) page(handle func(w http.ResponseWriter, r *http.Request) error) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := handle(w, r); err != nil {
			h.fail(w, r, err)
		}
	})
}

// httpError is an error shown with its status code.
type httpError struct {
	code int
	msg  string
}

func (e *httpError) Error() string { return e.msg }

func notFound(msg string) error   { return &httpError{code: http.StatusNotFound, msg: msg} }
func badRequest(msg string) error { return &httpError{code: http.StatusBadRequest, msg: msg} }

// fail shows err as a page: its httpError's code, else 502, since what
// fails otherwise is Kafka or PostgreSQL behind the console.
func (h *Handler) fail(w http.ResponseWriter, r *http.Request, err error) {
	code := http.StatusBadGateway
	var he *httpError
	if errors.As(err, &he) {
		code = he.code
	} else {
		h.cfg.Logger.Warn("console: request failed", "path", r.URL.Path, "error", err)
	}
	h.render(w, r, code, "error.html", http.StatusText(code), err.Error())
}

// securityHeaders forbids what the console never needs: scripts and
// styles from elsewhere or inline, framing, sniffing content types, and
// referrers that would carry its URLs.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cache-Control", "no-store")
		next.ServeHTTP(w, r)
	})
}
