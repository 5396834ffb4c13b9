package main

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/koto-dev/watermill-koto/kototest"
)

// TestConsoleListening serves koto console beyond localhost with a token,
// where every request without it is refused, and on localhost without
// one, where only requests addressed to localhost are answered.
func TestConsoleListening(t *testing.T) {
	brokers := strings.Join(kototest.Brokers(t), ",")
	const token = "0123456789abcdef0123"

	t.Run("beyond localhost", func(t *testing.T) {
		base := startConsole(t, brokers, "-listen", "0.0.0.0:0", "-token", "ops:"+token)
		for _, rq := range []struct{ method, path, bearer string }{
			{"GET", "/", ""}, {"GET", "/replays", "wrong-wrong-wrong-wrong"},
			{"POST", "/groups/g/replay", ""}, {"POST", "/replays/x/start", ""}, {"POST", "/groups/g/replay", "wrong-wrong-wrong-wrong"},
		} {
			code := request(t, rq.method, base+rq.path, rq.bearer, "")
			if code == http.StatusOK || (rq.method == "POST" && code != http.StatusUnauthorized) {
				t.Errorf("%s %s with token %q: %d, want it refused", rq.method, rq.path, rq.bearer, code)
			}
		}
		if code := request(t, "GET", base+"/", token, ""); code != http.StatusOK {
			t.Errorf("GET / with the token: %d, want 200", code)
		}
	})

	t.Run("localhost", func(t *testing.T) {
		base := startConsole(t, brokers, "-listen", "127.0.0.1:0", "-read-only")
		if code := request(t, "GET", base+"/", "", ""); code != http.StatusOK {
			t.Errorf("GET / on localhost: %d, want 200", code)
		}
		if code := request(t, "GET", base+"/", "", "console.example.com"); code != http.StatusForbidden {
			t.Errorf("GET / addressed to another host: %d, want 403", code)
		}
		if code := request(t, "POST", base+"/groups/g/replay", "", ""); code != http.StatusForbidden {
			t.Errorf("an action of a read-only console: %d, want 403", code)
		}
	})
}

// startConsole runs koto console with args until the test ends and
// returns its URL on 127.0.0.1.
func startConsole(t *testing.T, brokers string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errOut kototest.Buffer
	done := make(chan error, 1)
	env := map[string]string{envBrokers: brokers}
	go func() {
		done <- run(ctx, cmdIO{stdout: &out, stderr: &errOut, getenv: func(k string) string { return env[k] }}, append([]string{"console"}, args...))
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("koto console: %v\n%s", err, errOut.String())
		}
	})
	served := regexp.MustCompile(`koto console on http://\S*:(\d+)/`)
	var port string
	kototest.WaitFor(t, "koto console to listen", func() bool {
		if m := served.FindStringSubmatch(out.String()); m != nil {
			port = m[1]
		}
		return port != ""
	})
	return "http://127.0.0.1:" + port
}

// request sends one request without following redirects and returns its
// status; host, if set, replaces the Host header.
func request(t *testing.T, method, rawURL, bearer, host string) int {
	t.Helper()
	var form *strings.Reader
	if method == "POST" {
		form = strings.NewReader(url.Values{"scope": {"matching"}}.Encode())
	} else {
		form = strings.NewReader("")
	}
	req, err := http.NewRequest(method, rawURL, form)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	if host != "" {
		req.Host = host
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, rawURL, err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode
}
