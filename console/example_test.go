package console_test

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/broker/embedded"
	"github.com/koto-dev/watermill-koto/console"
)

// Mount the console under /koto/ of a service's admin server.
func ExampleNewHandler() {
	b, err := embedded.Start(context.Background())
	if err != nil {
		log.Fatal(err)
	}
	defer b.Close()

	h, err := console.NewHandler(console.Config{
		Broker:   broker.Config{Brokers: b.Addrs()}, // the services' configuration
		ReadOnly: true,
		Logger:   slog.New(slog.DiscardHandler),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer h.Close()
	admin := http.NewServeMux()
	admin.Handle("/koto/", http.StripPrefix("/koto", h))
	srv := httptest.NewServer(admin)
	defer srv.Close()

	resp, err := http.Get(srv.URL + "/koto/")
	if err != nil {
		log.Fatal(err)
	}
	defer resp.Body.Close()
	page, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.Status, strings.Contains(string(page), "<h1>Overview</h1>"))
	// Output: 200 OK true
}
