package console

import (
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/kototest"
)

// TestLocalPath: a path of the console passes as it is; anything a
// browser could take for another site, or for no path at all, becomes
// "/".
func TestLocalPath(t *testing.T) {
	for _, p := range []string{
		"/", "/replays", "/groups/x", "/groups/x?q=a", "/groups/x/letters?q=a&type=order-placed&until=2026-01-02T15:04",
		"/groups/a%2Fb/letters", "/groups/x?q=http://evil.example", "/groups/x#top", "/@evil.example", "/groups/x?q=/../", "/groups/..x", "/groups/.hidden",
	} {
		if got := localPath(p); got != p {
			t.Errorf("localPath(%q) = %q, want it kept", p, got)
		}
	}
	for _, p := range []string{
		"", "replays", "//evil.example", "///evil.example", "/\\evil.example", "\\\\evil.example", "\\/evil.example",
		"/\t/evil.example", "/\r/evil.example", "/\n/evil.example", "\t//evil.example", "/\x00/evil.example", "/\x7f/evil.example",
		"/%09/evil.example", "/%0d%0a/evil.example", "/%2F%2Fevil.example", "/%2f/evil.example", "/%5Cevil.example", "/%5c%5cevil.example",
		"%2F%2Fevil.example", "http://evil.example", "https:evil.example", "https:/evil.example", "//user@evil.example/",
		"javascript:alert(1)", "data:text/html,x", " /evil.example", "/groups/x?q=\\", "/groups/x?q=a\tb", "/%zz",
		"/../x", "/groups/../../x", "/%2e%2e/x", "/%2E./x", "/.%2e/x", "/./x", "/groups/..",
	} {
		if got := localPath(p); got != "/" {
			t.Errorf("localPath(%q) = %q, want /", p, got)
		}
	}
}

// TestLoginRedirectStaysLocal: a login whose next browsers would read as
// another site lands on the console, mounted at the root or under a
// prefix.
func TestLoginRedirectStaysLocal(t *testing.T) {
	token := Token{Name: "ops", Secret: "0123456789abcdef0123"}
	h, err := NewHandler(Config{Broker: broker.Config{Brokers: kototest.Brokers(t)}, Groups: []string{"none"}, Tokens: []Token{token}, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	mux := http.NewServeMux()
	mux.Handle("/", h)
	mux.Handle("/koto/", http.StripPrefix("/koto", h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	for _, base := range []string{"", "/koto"} {
		c := newClient(t, srv.URL+base)
		c.get(t, "/login", http.StatusOK)
		csrf := h.csrfMAC(c.cookie(t, csrfCookie))
		for _, next := range []string{"/\t/evil.example", "/\\evil.example", "/%2F%2Fevil.example"} {
			resp := c.post(t, "/login", url.Values{csrfField: {csrf}, "token": {token.Secret}, "next": {next}})
			loc, err := url.Parse(srv.URL + base + "/login")
			if err == nil {
				loc, err = loc.Parse(resp.location)
			}
			if resp.code != http.StatusSeeOther || err != nil || loc.Host != srv.Listener.Addr().String() || loc.Path != base+"/" {
				t.Errorf("login under %q with next %q: %d to %q, want 303 to %s/", base, next, resp.code, resp.location, base)
			}
		}
	}
}
