package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	kotolib "github.com/koto-dev/watermill-koto"
	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/console"
)

// envConsoleToken holds the console's tokens, NAME:SECRET separated by
// commas: safer than -token, which other users of the machine can see.
const envConsoleToken = "KOTO_CONSOLE_TOKEN"

const (
	defaultListen = "127.0.0.1:8080"
	// consoleUsage follows "koto ".
	consoleUsage = "console [-listen ADDR] [-token NAME:SECRET] [-read-only] [-metrics] [-mapping M] [-brokers ...] [-database-url URL] [-schema S]"
	// shutdownTimeout bounds the wait for requests under way when the
	// command is interrupted.
	shutdownTimeout = 5 * time.Second
)

func consoleCommand() command {
	return command{summary: "serve the operations console: lag, dead letters by cause, replay and discard, outbox backlog", run: runConsole}
}

// consoleFlags are the settings of koto console.
type consoleFlags struct {
	kafka                kafkaFlags
	databaseURL, schemas string
	listen, groups       string
	mapping              string
	tokens               tokenFlags
	readOnly, metrics    bool
	sample               time.Duration
}

// tokenFlags collects the repeated -token flags.
type tokenFlags []string

func (t *tokenFlags) String() string     { return "" }
func (t *tokenFlags) Set(v string) error { *t = append(*t, v); return nil }

func parseConsoleFlags(cio cmdIO, args []string) (*consoleFlags, error) {
	c := &consoleFlags{}
	fs := subcommandFlags(consoleUsage, consoleCommand().summary)
	c.kafka.register(fs, cio.getenv)
	registerDatabaseURL(fs, &c.databaseURL)
	fs.StringVar(&c.schemas, "schema", "koto", "comma-separated schemas whose outbox tables to show")
	fs.StringVar(&c.listen, "listen", defaultListen, "address to serve on; beyond localhost it needs a token")
	fs.StringVar(&c.groups, "group", "", "comma-separated consumer groups to show (default: every group of the cluster and of its dead-letter topics)")
	fs.Var(&c.tokens, "token", "NAME:SECRET that opens the console, repeatable; replays are logged under NAME (default $"+envConsoleToken+", which is safer)")
	fs.BoolVar(&c.readOnly, "read-only", false, "show, but replay or discard nothing")
	fs.StringVar(&c.mapping, "mapping", "", "read every dead letter in this mapping: watermill, cloudevents or wolverine (default: each record's own, found from its headers)")
	fs.BoolVar(&c.metrics, "metrics", false, "serve /metrics in Prometheus's format")
	fs.DurationVar(&c.sample, "sample", console.DefaultSampleInterval, "how often to sample the overview's charts")
	if err := parseNoArgs(fs, cio, args); err != nil {
		return nil, err
	}
	return c, nil
}

// tokenList returns the tokens of -token, else of $KOTO_CONSOLE_TOKEN.
func (c *consoleFlags) tokenList(getenv func(string) string) ([]console.Token, error) {
	values := []string(c.tokens)
	if len(values) == 0 && getenv(envConsoleToken) != "" {
		values = strings.Split(getenv(envConsoleToken), ",")
	}
	var tokens []console.Token
	for _, v := range values {
		name, secret, ok := strings.Cut(strings.TrimSpace(v), ":")
		if !ok || name == "" || secret == "" {
			return nil, usageError("a token is NAME:SECRET, such as ops:$(openssl rand -hex 16)")
		}
		tokens = append(tokens, console.Token{Name: name, Secret: secret})
	}
	return tokens, nil
}

// checkListen refuses to listen beyond localhost without a token.
func checkListen(addr string, tokens []console.Token) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return usageError(fmt.Sprintf("-listen %q: %v; use host:port, such as %s", addr, err, defaultListen))
	}
	if len(tokens) == 0 && !isLoopback(host) {
		return usageError(fmt.Sprintf("-listen %s is beyond localhost, where anyone could replay: set a token with -token NAME:SECRET or $%s", addr, envConsoleToken))
	}
	return nil
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// localHostOnly refuses requests that name another host than this
// machine: a console without a token is for the browsers of this machine,
// and this keeps a web page from reaching it through a DNS name that
// points at 127.0.0.1.
func localHostOnly(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, err := net.SplitHostPort(r.Host)
		if err != nil {
			host = r.Host
		}
		if !isLoopback(strings.Trim(host, "[]")) {
			http.Error(w, "koto console: open it as localhost or 127.0.0.1; it serves no other host without a token", http.StatusForbidden)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func runConsole(ctx context.Context, cio cmdIO, args []string) error {
	c, err := parseConsoleFlags(cio, args)
	if err != nil {
		return err
	}
	cfg, err := c.config(ctx, cio)
	if err != nil {
		return err
	}
	if cfg.Pool != nil {
		defer cfg.Pool.Close()
	}
	if err := checkListen(c.listen, cfg.Tokens); err != nil {
		return err
	}
	h, err := console.NewHandler(cfg)
	if errors.Is(err, kotolib.ErrInvalidConfig) {
		return usageError(err.Error())
	}
	if err != nil {
		return err
	}
	defer h.Close()
	var handler http.Handler = h
	if len(cfg.Tokens) == 0 {
		handler = localHostOnly(h)
	}
	return serve(ctx, cio, c.listen, handler, c.readOnly)
}

// config returns the console's configuration that the flags describe.
func (c *consoleFlags) config(ctx context.Context, cio cmdIO) (console.Config, error) {
	brokerCfg, err := c.kafka.config()
	if err != nil {
		return console.Config{}, err
	}
	tokens, err := c.tokenList(cio.getenv)
	if err != nil {
		return console.Config{}, err
	}
	pool, err := (&outboxFlags{databaseURL: databaseURL(c.databaseURL, cio.getenv)}).connect(ctx)
	if err != nil {
		return console.Config{}, err
	}
	return console.Config{
		Broker: brokerCfg, Mapping: broker.Mapping(c.mapping), Groups: splitList(c.groups), Pool: pool, OutboxSchemas: splitList(c.schemas),
		ReadOnly: c.readOnly, Tokens: tokens, Metrics: c.metrics, SampleInterval: c.sample,
		Logger: slog.New(slog.NewTextHandler(cio.stderr, nil)),
	}, nil
}

// splitList splits a comma-separated flag as -brokers is split.
func splitList(s string) []string { return broker.SplitBrokers(s) }

// serve serves handler on addr until ctx ends.
func serve(ctx context.Context, cio cmdIO, addr string, handler http.Handler, readOnly bool) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("listen: %w", err)
	}
	srv := &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second}
	mode := ""
	if readOnly {
		mode = " (read-only)"
	}
	fmt.Fprintf(cio.stdout, "koto console on http://%s/%s\n", ln.Addr(), mode)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownTimeout)
	defer cancel()
	err = srv.Shutdown(shutdown)
	<-done
	return err
}
