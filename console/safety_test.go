package console

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
)

// TestSafety checks that every action of the console is refused in
// read-only mode, and every request without a token when it takes
// tokens, and that nothing is replayed meanwhile.
func TestSafety(t *testing.T) {
	w := newWorld(t)

	t.Run("read-only", func(t *testing.T) {
		h, srv := w.console(t, Config{ReadOnly: true})
		c := newClient(t, srv.URL)
		paths, planned := actions(t, h, w.orders.group)
		group := "/groups/" + w.orders.group
		for _, page := range []string{"/", group, group + "/letters", group + "/letters/" + w.firstLetter(t, w.orders.group), "/replays", "/replays/" + planned} {
			if body := c.get(t, page, http.StatusOK); strings.Contains(body, `method="post"`) {
				t.Errorf("read-only page %s has a form that posts", page)
			}
		}
		csrf := h.csrfMAC(c.cookie(t, csrfCookie))
		for _, rt := range paths {
			resp := c.post(t, rt, url.Values{csrfField: {csrf}, "scope": {"matching"}})
			if resp.code != http.StatusForbidden || !strings.Contains(resp.body, "read-only") {
				t.Errorf("read-only POST %s: %d %q, want 403 read-only", rt, resp.code, resp.body)
			}
		}
		if got := w.replayed(t, w.orders.topic); len(got) != 0 {
			t.Errorf("read-only console replayed %v", got)
		}
		if resp := c.do(t, http.MethodGet, "/metrics", nil, ""); resp.code != http.StatusNotFound {
			t.Errorf("GET /metrics of a console not asked for it: %d, want 404", resp.code)
		}
	})

	t.Run("token", func(t *testing.T) {
		token := Token{Name: "ops", Secret: "0123456789abcdef0123"}
		h, srv := w.console(t, Config{Tokens: []Token{token}})
		anon := newClient(t, srv.URL)
		anon.get(t, "/login", http.StatusOK)
		csrf := h.csrfMAC(anon.cookie(t, csrfCookie))
		for _, rt := range h.routes() {
			method, path, _ := strings.Cut(rt.pattern, " ")
			path = fill(path, w.orders.group, "unknown")
			resp := anon.do(t, method, path, url.Values{csrfField: {csrf}, "scope": {"matching"}}, "")
			refused := resp.code == http.StatusUnauthorized || (method == http.MethodGet && resp.code == http.StatusSeeOther && strings.Contains(resp.location, "/login"))
			if !refused {
				t.Errorf("%s %s without a token: %d, want it refused", method, path, resp.code)
			}
			if resp := anon.do(t, method, path, nil, "not-the-token"); resp.code != http.StatusUnauthorized {
				t.Errorf("%s %s with a wrong token: %d, want 401", method, path, resp.code)
			}
		}
		if resp := anon.do(t, http.MethodPost, "/login", url.Values{csrfField: {csrf}, "token": {"wrong"}}, ""); resp.code != http.StatusUnauthorized {
			t.Errorf("login with a wrong token: %d, want 401", resp.code)
		}
		if resp := anon.do(t, http.MethodGet, "/", nil, token.Secret); resp.code != http.StatusOK {
			t.Errorf("GET / with the token: %d, want 200", resp.code)
		}
		if resp := anon.do(t, http.MethodPost, "/groups/"+w.orders.group+"/replay", url.Values{"scope": {"matching"}}, token.Secret); resp.code != http.StatusForbidden {
			t.Errorf("a replay with the token but no CSRF token: %d, want 403", resp.code)
		}
		if got := w.replayed(t, w.orders.topic); len(got) != 0 {
			t.Errorf("refused requests replayed %v", got)
		}

		signedIn := newClient(t, srv.URL)
		signedIn.get(t, "/login", http.StatusOK)
		csrf = h.csrfMAC(signedIn.cookie(t, csrfCookie))
		if resp := signedIn.do(t, http.MethodPost, "/login", url.Values{csrfField: {csrf}, "token": {token.Secret}, "next": {"/replays"}}, ""); resp.code != http.StatusSeeOther || resp.location != "/replays" {
			t.Errorf("login: %d to %q, want 303 to /replays", resp.code, resp.location)
		}
		if session := signedIn.cookie(t, sessionCookie); strings.Contains(session, token.Secret) {
			t.Error("the session cookie holds the token's secret")
		}
		signedIn.get(t, "/", http.StatusOK)
	})
}

// actions returns the paths of every action route of h, for group and a
// replay that h has planned, and that replay's ID.
func actions(t *testing.T, h *Handler, group string) ([]string, string) {
	t.Helper()
	j := &job{Group: group}
	h.jobs.add(j)
	var out []string
	for _, rt := range h.routes() {
		if !rt.action {
			continue
		}
		method, path, _ := strings.Cut(rt.pattern, " ")
		if method != http.MethodPost {
			t.Errorf("action %s is not a POST", rt.pattern)
		}
		out = append(out, fill(path, group, j.ID))
	}
	if len(out) == 0 {
		t.Fatal("no action route")
	}
	return out, j.ID
}

// fill puts values in a route's wildcards.
func fill(path, group, id string) string {
	return strings.NewReplacer("{group}", url.PathEscape(group), "{id}", id, "{partition}", "0", "{offset}", "0", "{$}", "").Replace(path)
}

// client is an HTTP client with cookies that does not follow redirects.
type client struct {
	base string
	http *http.Client
}

func newClient(t *testing.T, base string) *client {
	t.Helper()
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	return &client{base: base, http: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}
}

type response struct {
	code           int
	body, location string
}

func (c *client) do(t *testing.T, method, path string, form url.Values, bearer string) response {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, c.base+path, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return response{code: resp.StatusCode, body: string(b), location: resp.Header.Get("Location")}
}

func (c *client) get(t *testing.T, path string, want int) string {
	t.Helper()
	resp := c.do(t, http.MethodGet, path, nil, "")
	if resp.code != want {
		t.Fatalf("GET %s: %d, want %d: %s", path, resp.code, want, resp.body)
	}
	return resp.body
}

func (c *client) post(t *testing.T, path string, form url.Values) response {
	t.Helper()
	return c.do(t, http.MethodPost, path, form, "")
}

func (c *client) cookie(t *testing.T, name string) string {
	t.Helper()
	u, _ := url.Parse(c.base + "/")
	for _, ck := range c.http.Jar.Cookies(u) {
		if ck.Name == name {
			return ck.Value
		}
	}
	t.Fatalf("no cookie %s", name)
	return ""
}
