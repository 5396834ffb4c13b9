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
// payload shown as text. On CloudEvents dead letters, which carry no
// Watermill UUID, a replay of one cause sends exactly that cause (the
// confirmation giving the koto command of the same selection), a discard
// of the other shows its dead letters discarded, and a replay of
// everything then skips them. It saves a screenshot of each page in
// $KOTO_CONSOLE_SCREENSHOTS, or in the test's temporary directory.
func TestBrowser(t *testing.T) {
	b := newBrowser(t)
	w := newWorld(t)
	billing := w.seedCloudEvents(t)
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

	causeOf := func(t *testing.T, reason string) string {
		t.Helper()
		return b.eval(t, `Array.from(document.querySelectorAll("#causes tr.cause")).find(r => r.querySelector(".reason a").textContent === `+jsString(reason)+`).dataset.cause`)
	}
	// plan clicks button on the current page and waits for its
	// confirmation, which must offer to take count dead letters.
	plan := func(t *testing.T, button, count string) {
		t.Helper()
		b.click(t, button)
		b.wait(t, "#confirm")
		if got := b.text(t, "#plan-count"); !strings.HasPrefix(got, count) {
			t.Errorf("the confirmation counts %q, want %s", got, count)
		}
	}
	start := func(t *testing.T, name string) {
		t.Helper()
		b.screenshot(t, name+"-confirm")
		b.click(t, "#start")
		b.wait(t, ".state-done")
		b.screenshot(t, name+"-result")
	}

	t.Run("replay a cause without Watermill UUIDs", func(t *testing.T) {
		b.open(t, base+"/groups/"+billing.group)
		id := causeOf(t, negativeReason)
		plan(t, `tr[data-cause="`+id+`"] button.replay-cause`, "3")
		if got, want := b.text(t, "#cli"), "koto dlq replay -group "+billing.group+" -cause "+id; got != want {
			t.Errorf("the confirmation's command is %q, want %q", got, want)
		}
		start(t, "replay-cloudevents")
		b.expectText(t, "#sent", "3")
		if got, want := w.replayed(t, billing.topic), sorted(billing.failed["negative"]); !slices.Equal(got, want) {
			t.Errorf("replayed on %s: %v, want each of the cause's %v once", billing.topic, got, want)
		}
	})

	t.Run("discard a cause", func(t *testing.T) {
		b.open(t, base+"/groups/"+billing.group)
		id := causeOf(t, `sku "…" not found`)
		plan(t, `tr[data-cause="`+id+`"] button.discard-cause`, "2")
		start(t, "discard")
		b.expectText(t, "#discarded", "2")
		b.open(t, base+"/groups/"+billing.group)
		b.expectText(t, `tr[data-cause="`+id+`"] .pending`, "0")
		b.open(t, base+"/groups/"+billing.group+"/letters")
		states := b.eval(t, `Array.from(document.querySelectorAll("#letters tr.letter")).map(r => r.querySelector(".uuid").textContent + "=" + r.querySelector(".state").textContent.trim()).sort().join(" ")`)
		var want []string
		for kind, state := range map[string]string{"negative": "replayed", "sku": "discarded"} {
			for _, uuid := range billing.failed[kind] {
				want = append(want, uuid+"="+state)
			}
		}
		slices.Sort(want)
		if states != strings.Join(want, " ") {
			t.Errorf("the list shows %q, want %q", states, strings.Join(want, " "))
		}
		b.screenshot(t, "discarded")
		plan(t, "#replay-matching", "Nothing to send")
		start(t, "replay-after-discard")
		b.expectText(t, "#sent", "0")
		b.expectText(t, "#already", "3")
		b.expectText(t, "#already-discarded", "2")
		if got := w.replayed(t, billing.topic); len(got) != 3 {
			t.Errorf("after the discard and a replay of everything, %d replayed records on %s, want still 3", len(got), billing.topic)
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
