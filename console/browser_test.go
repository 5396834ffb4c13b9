package console

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestBrowser drives the console in headless Chromium, mounted under a
// prefix, against the embedded broker and PostgreSQL: the overview's
// counts and lag, the causes of both groups, a replay of one cause from
// its page (each of its dead letters sent once, checked on Kafka, and the
// page's result), a second replay that sends nothing, and a <script>
// payload shown as text. It saves a screenshot of each page in
// $KOTO_CONSOLE_SCREENSHOTS, or in the test's temporary directory.
func TestBrowser(t *testing.T) {
	b := newBrowser(t)
	w := newWorld(t)
	h, _ := w.console(t, Config{})
	mux := http.NewServeMux()
	mux.Handle("/koto/", http.StripPrefix("/koto", h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	base := srv.URL + "/koto"

	t.Run("overview", func(t *testing.T) {
		b.open(t, base+"/")
		orders := `#groups tr[data-group="` + w.orders.group + `"] `
		shipments := `#groups tr[data-group="` + w.shipments.group + `"] `
		b.expectText(t, orders+".lag", "4")
		b.expectText(t, orders+".dead-letters", "5")
		b.expectText(t, shipments+".lag", "0")
		b.expectText(t, shipments+".dead-letters", "2")
		if got := b.text(t, orders+".newest"); !strings.HasSuffix(got, "ago") {
			t.Errorf("newest dead letter of %s: %q, want an age", w.orders.group, got)
		}
		b.expectText(t, "#outboxes .waiting", "6")
		b.expectText(t, "#outboxes .scheduled", "1")
		b.expectText(t, "#outboxes .forwarder", "none")
		b.screenshot(t, "overview")
	})

	t.Run("causes", func(t *testing.T) {
		b.open(t, base+"/groups/"+w.shipments.group)
		if got := b.causes(t); len(got) != 2 {
			t.Errorf("causes of %s: %v, want the decode failure and the type mismatch", w.shipments.group, got)
		}
		b.open(t, base+"/groups/"+w.orders.group)
		got := b.causes(t)
		want := [][]string{{negativeReason, "3"}, {`sku "…" not found`, "2"}}
		slices.SortFunc(got, func(a, b []string) int { return strings.Compare(a[0], b[0]) })
		if !slices.EqualFunc(got, want, slices.Equal) {
			t.Errorf("causes of %s: %q, want %q", w.orders.group, got, want)
		}
		b.screenshot(t, "group")
	})

	replayNegative := func(t *testing.T, name string) {
		b.open(t, base+"/groups/"+w.orders.group)
		id := b.eval(t, `Array.from(document.querySelectorAll("#causes tr.cause")).find(r => r.querySelector(".reason a").textContent === `+jsString(negativeReason)+`).dataset.cause`)
		b.click(t, `tr[data-cause="`+id+`"] button.replay-cause`)
		b.wait(t, "#confirm")
		b.screenshot(t, name+"-confirm")
		b.click(t, "#start")
		b.wait(t, ".state-done")
		b.screenshot(t, name+"-result")
	}

	t.Run("replay", func(t *testing.T) {
		replayNegative(t, "replay")
		b.expectText(t, "#sent", "3")
		b.expectText(t, "#already", "0")
		if got, want := w.replayed(t, w.orders.topic), sorted(w.orders.failed["negative"]); !slices.Equal(got, want) {
			t.Errorf("replayed on %s: %v, want each of %v once", w.orders.topic, got, want)
		}
		b.open(t, base+"/")
		b.expectText(t, `#groups tr[data-group="`+w.orders.group+`"] .lag`, "7") // its consumer is stopped
	})

	t.Run("replay again", func(t *testing.T) {
		b.open(t, base+"/groups/"+w.orders.group)
		replayNegative(t, "replay-again")
		b.expectText(t, "#sent", "0")
		b.expectText(t, "#already", "3")
		if got := w.replayed(t, w.orders.topic); len(got) != 3 {
			t.Errorf("after a second replay, %d replayed records on %s, want still 3", len(got), w.orders.topic)
		}
	})

	t.Run("script payload", func(t *testing.T) {
		b.open(t, base+"/groups/"+w.shipments.group+"/letters?type=script")
		b.click(t, "#letters tr.letter td a")
		b.wait(t, "#payload")
		if got := b.text(t, "#payload"); got != scriptPayload {
			t.Errorf("payload shown as %q, want the text %q", got, scriptPayload)
		}
		if ran := b.eval(t, `String(window.kotoXSS !== undefined || document.querySelectorAll("main script").length > 0)`); ran != "false" {
			t.Error("the payload's <script> became an element of the page")
		}
		b.screenshot(t, "letter")
	})
}

// browser is a headless Chromium tab that fails the test on an error.
type browser struct {
	ctx   context.Context
	shots string
}

// chromiumFlags keep Chromium from the network, which this machine
// refuses: without them it retries its services' connections without end.
var chromiumFlags = []chromedp.ExecAllocatorOption{
	chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun,
	chromedp.Flag("disable-quic", true),
	chromedp.Flag("disable-background-networking", true),
	chromedp.Flag("disable-component-update", true),
	chromedp.Flag("disable-sync", true),
	chromedp.WindowSize(1360, 900),
}

// newBrowser starts Chromium for t. Without it the test skips, but fails
// with CI=true.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	path := chromiumPath()
	if path == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("Chromium is not installed (apt-get install chromium); CI needs it for the browser test")
		}
		t.Skip("Chromium is not installed (apt-get install chromium)")
	}
	opts := append([]chromedp.ExecAllocatorOption{chromedp.ExecPath(path), chromedp.UserDataDir(t.TempDir())}, chromiumFlags...)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(alloc)
	ctx, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() { cancelTimeout(); cancelTab(); cancelAlloc() })
	shots := os.Getenv("KOTO_CONSOLE_SCREENSHOTS")
	if shots == "" {
		shots = t.TempDir()
	}
	return &browser{ctx: ctx, shots: shots}
}

func chromiumPath() string {
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

func (b *browser) open(t *testing.T, url string) {
	t.Helper()
	if err := chromedp.Do(b.ctx, chromedp.Navigate(url)); err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
}

func (b *browser) click(t *testing.T, sel string) {
	t.Helper()
	if err := chromedp.Do(b.ctx, chromedp.Click(chromedp.CSS(sel), chromedp.NodeVisible)); err != nil {
		t.Fatalf("click %s: %v", sel, err)
	}
}

func (b *browser) wait(t *testing.T, sel string) {
	t.Helper()
	if err := chromedp.Do(b.ctx, chromedp.WaitVisible(chromedp.CSS(sel))); err != nil {
		t.Fatalf("wait for %s: %v", sel, err)
	}
}

// text returns the text content of the first element sel finds, trimmed.
func (b *browser) text(t *testing.T, sel string) string {
	t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.TextContent(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("text of %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

func (b *browser) expectText(t *testing.T, sel, want string) {
	t.Helper()
	if got := b.text(t, sel); got != want {
		t.Errorf("%s shows %q, want %q", sel, got, want)
	}
}

func (b *browser) eval(t *testing.T, js string) string {
	t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](js))
	if err != nil {
		t.Fatalf("evaluate %s: %v", js, err)
	}
	return s
}

// causes returns the reason and count of each row of the causes table.
func (b *browser) causes(t *testing.T) [][]string {
	t.Helper()
	rows, err := chromedp.Run(b.ctx, chromedp.Evaluate[[][]string](
		`Array.from(document.querySelectorAll("#causes tr.cause")).map(r => [r.querySelector(".reason a").textContent, r.querySelector(".count").textContent])`))
	if err != nil {
		t.Fatalf("read the causes: %v", err)
	}
	return rows
}

func (b *browser) screenshot(t *testing.T, name string) {
	t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(b.shots, name+".png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
}

func jsString(s string) string {
	return "`" + strings.NewReplacer("`", "\\`", "\\", "\\\\", "$", "\\$").Replace(s) + "`"
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
