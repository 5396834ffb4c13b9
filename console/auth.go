package console

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"net/http"
	"net/url"
	"strings"
)

// sessionCookie holds a browser's proof of a token: the token's name and
// a MAC of it and its secret, never the secret itself.
const sessionCookie = "koto_console_session"

type whoKey struct{}

// who returns the name of the token the request came with; "" when the
// console takes no tokens.
func who(r *http.Request) string {
	name, _ := r.Context().Value(whoKey{}).(string)
	return name
}

// requireToken lets a request through only with a valid token, when
// there are tokens: a session cookie or an Authorization: Bearer header.
// A browser without one is sent to the login page; anything else, such as
// a scraper of /metrics, gets a 401.
// The login page and the static assets are open, as they show nothing
// of Kafka or PostgreSQL.
func (h *Handler) requireToken(next http.Handler) http.Handler {
	if len(h.cfg.Tokens) == 0 {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/login" || strings.HasPrefix(r.URL.Path, "/static/") {
			next.ServeHTTP(w, r)
			return
		}
		name, ok := h.authenticate(r)
		switch {
		case ok:
			next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), whoKey{}, name)))
		case r.Method == http.MethodGet && r.Header.Get("Authorization") == "" && strings.Contains(r.Header.Get("Accept"), "text/html"):
			http.Redirect(w, r, basePath(r)+"/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
		default:
			w.Header().Set("WWW-Authenticate", `Bearer realm="koto console"`)
			http.Error(w, "a token is required", http.StatusUnauthorized)
		}
	})
}

// authenticate returns the name of the token r carries.
func (h *Handler) authenticate(r *http.Request) (string, bool) {
	if bearer, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok {
		return h.tokenOf(bearer)
	}
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return "", false
	}
	name, mac, ok := strings.Cut(c.Value, ".")
	if !ok {
		return "", false
	}
	for _, t := range h.cfg.Tokens {
		if t.Name == name && hmac.Equal([]byte(mac), []byte(h.sessionMAC(t))) {
			return name, true
		}
	}
	return "", false
}

// tokenOf returns the name of the token whose secret is secret, comparing
// every token in constant time.
func (h *Handler) tokenOf(secret string) (string, bool) {
	name, found := "", false
	for _, t := range h.cfg.Tokens {
		if subtle.ConstantTimeCompare([]byte(secret), []byte(t.Secret)) == 1 {
			name, found = t.Name, true
		}
	}
	return name, found
}

func (h *Handler) sessionMAC(t Token) string {
	m := hmac.New(sha256.New, h.key)
	m.Write([]byte("session\x00" + t.Name + "\x00" + t.Secret))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

func (h *Handler) loginPage(w http.ResponseWriter, r *http.Request) error {
	return h.render(w, r, http.StatusOK, "login.html", "Sign in", loginData{Next: r.URL.Query().Get("next")})
}

type loginData struct {
	Next   string
	Failed bool
}

// login checks the token of the form and sets the session cookie.
func (h *Handler) login(w http.ResponseWriter, r *http.Request) error {
	next := localPath(r.PostFormValue("next"))
	name, ok := h.tokenOf(r.PostFormValue("token"))
	if !ok {
		return h.render(w, r, http.StatusUnauthorized, "login.html", "Sign in", loginData{Next: next, Failed: true})
	}
	for _, t := range h.cfg.Tokens {
		if t.Name == name {
			h.setCookie(w, r, sessionCookie, name+"."+h.sessionMAC(t))
		}
	}
	http.Redirect(w, r, basePath(r)+next, http.StatusSeeOther)
	return nil
}

func (h *Handler) logout(w http.ResponseWriter, r *http.Request) error {
	h.setCookie(w, r, sessionCookie, "")
	http.Redirect(w, r, basePath(r)+"/login", http.StatusSeeOther)
	return nil
}

// localPath returns p if it is a path of the console, else "/": a login
// must not redirect elsewhere. Browsers remove tabs and newlines from a
// URL and read a backslash as a slash, so "/\t/evil.example" is
// "//evil.example" to them, another site: p must be a path alone, with no
// control character or backslash even percent-encoded, must not start
// with two slashes, and has no dot segment that would climb out of the
// console's path prefix.
func localPath(p string) string {
	u, err := url.Parse(p)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" {
		return "/"
	}
	for _, s := range []string{p, u.Path} {
		if !strings.HasPrefix(s, "/") || strings.HasPrefix(s, "//") || strings.ContainsFunc(s, unsafeInURL) {
			return "/"
		}
	}
	if hasDotSegment(u.EscapedPath()) || hasDotSegment(u.Path) {
		return "/"
	}
	return u.String()
}

// hasDotSegment reports a "." or ".." segment in path p, which also
// matches their percent-encoded forms once p is decoded.
func hasDotSegment(p string) bool {
	for seg := range strings.SplitSeq(strings.ToLower(p), "/") {
		if seg == "." || seg == ".." || seg == "%2e" || seg == "%2e%2e" || seg == ".%2e" || seg == "%2e." {
			return true
		}
	}
	return false
}

// unsafeInURL reports an ASCII control character or a backslash.
func unsafeInURL(r rune) bool {
	return r < 0x20 || r == 0x7f || r == '\\'
}

// setCookie sets a cookie for the console's path alone, kept from
// scripts and from other sites' requests; an empty value deletes it.
func (h *Handler) setCookie(w http.ResponseWriter, r *http.Request, name, value string) {
	c := &http.Cookie{
		Name: name, Value: value, Path: basePath(r) + "/",
		HttpOnly: true, Secure: r.TLS != nil, SameSite: http.SameSiteStrictMode,
	}
	if value == "" {
		c.MaxAge = -1
	}
	http.SetCookie(w, c)
}

// basePath is the prefix the console is mounted under, which
// http.StripPrefix took from the path: "" at the root.
func basePath(r *http.Request) string {
	full, _, _ := strings.Cut(r.RequestURI, "?")
	if base, ok := strings.CutSuffix(full, r.URL.EscapedPath()); ok {
		return base
	}
	return ""
}
