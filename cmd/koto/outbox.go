package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/koto-dev/watermill-koto/internal/config"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/internal/cli"
	"github.com/koto-dev/watermill-koto/internal/pgschema"
	"github.com/koto-dev/watermill-koto/outbox"
)

// envDatabaseURL gives -database-url its default, as it does the services'
// and the examples'.
const envDatabaseURL = "DATABASE_URL"

// defaultDatabaseURL is the local development database.
const defaultDatabaseURL = "postgres://postgres@127.0.0.1:5432/test?sslmode=disable"

// Limits of the command's PostgreSQL session: it gives up rather than
// queue behind DDL or run long on a loaded database.
const (
	connectTimeout   = "10s"
	lockTimeout      = "5s"
	statementTimeout = "30s"
)

func outboxCommand() command {
	return command{summary: "show the backlog of the outbox tables of a database", run: runOutbox}
}

// outboxSubcommand is one subcommand of koto outbox.
type outboxSubcommand struct {
	usage   string // after "koto outbox "
	summary string
	run     func(ctx context.Context, cio cmdIO, o *outboxFlags) error
}

func outboxSubcommands() map[string]outboxSubcommand {
	return map[string]outboxSubcommand{
		"status": {
			usage:   "status [-database-url URL] [-schema S] [-table T] [-json]",
			summary: "per outbox table: rows waiting, rows held, oldest row, forwarder lag, messages scheduled, since when, next due, active forwarder",
			run:     runOutboxStatus,
		},
	}
}

func runOutbox(ctx context.Context, cio cmdIO, args []string) error {
	sub, err := pickSubcommand("outbox", outboxSubcommands(), func(s outboxSubcommand) string { return s.summary }, args, cio.stdout)
	if err != nil {
		return err
	}
	o, err := parseOutboxFlags(sub, cio, args[1:])
	if err == nil {
		err = sub.run(ctx, cio, o)
	}
	return cli.In("koto outbox "+args[0], err)
}

// outboxFlags are the settings of an outbox subcommand.
type outboxFlags struct {
	databaseURL, schema, table string
	json                       bool
}

func parseOutboxFlags(sub outboxSubcommand, cio cmdIO, args []string) (*outboxFlags, error) {
	o := &outboxFlags{}
	fs := subcommandFlags("outbox "+sub.usage, sub.summary)
	registerDatabaseURL(fs, &o.databaseURL)
	fs.StringVar(&o.schema, "schema", "koto", "the schema of the outbox tables (outbox.Config.Schema)")
	fs.StringVar(&o.table, "table", "", "one outbox table (outbox.Config.Table); default: every outbox table of -schema")
	fs.BoolVar(&o.json, "json", false, "print JSON for scripts instead of text")
	if err := parseNoArgs(fs, cio, args); err != nil {
		return nil, err
	}
	o.databaseURL = databaseURL(o.databaseURL, cio.getenv)
	return o, nil
}

// registerDatabaseURL adds -database-url to fs. Its default is not shown
// as the flag's: $DATABASE_URL may hold a password.
func registerDatabaseURL(fs *flag.FlagSet, url *string) {
	fs.StringVar(url, "database-url", "", "PostgreSQL URL (default $"+envDatabaseURL+", else "+defaultDatabaseURL+")")
}

// databaseURL is the flag's value, else $DATABASE_URL, else the default.
func databaseURL(flagValue string, getenv func(string) string) string {
	return cmp.Or(flagValue, getenv(envDatabaseURL), defaultDatabaseURL)
}

// parseNoArgs parses the flags of a subcommand that takes no arguments.
func parseNoArgs(fs *flag.FlagSet, cio cmdIO, args []string) error {
	rest, err := parseInterspersed(fs, cio.stdout, args)
	switch {
	case err != nil:
		return err
	case len(rest) > 0:
		return usageError(fmt.Sprintf("takes no arguments, got %q", rest))
	}
	return nil
}

// connect opens a small pool on the database of -database-url, with the
// session limits above.
func (o *outboxFlags) connect(ctx context.Context) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(o.databaseURL)
	if err != nil {
		return nil, usageError("-database-url: " + err.Error())
	}
	cfg.MaxConns = 1
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout, _ = time.ParseDuration(connectTimeout)
	}
	for k, v := range map[string]string{"application_name": "koto", "lock_timeout": lockTimeout, "statement_timeout": statementTimeout} {
		if _, set := cfg.ConnConfig.RuntimeParams[k]; !set {
			cfg.ConnConfig.RuntimeParams[k] = v
		}
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to PostgreSQL: %w", err)
	}
	return pool, nil
}

// outboxes returns the outboxes that the flags name: -table, or every
// outbox table of -schema.
func (o *outboxFlags) outboxes(ctx context.Context, pool *pgxpool.Pool) ([]*outbox.Outbox, error) {
	cfgs := []outbox.Config{{Schema: o.schema, Table: o.table}}
	if o.table == "" {
		var err error
		if cfgs, err = outbox.FindTables(ctx, pool, o.schema); err != nil {
			return nil, usageOrError(err)
		}
		if len(cfgs) == 0 {
			return nil, fmt.Errorf("no outbox table in schema %s: check -schema, or -database-url", pgschema.QuoteIdent(o.schema))
		}
	}
	boxes := make([]*outbox.Outbox, len(cfgs))
	for i, cfg := range cfgs {
		var err error
		if boxes[i], err = outbox.New(pool, cfg); err != nil {
			return nil, usageOrError(err)
		}
	}
	return boxes, nil
}

// usageOrError makes an invalid configuration, which the flags gave, a
// usage error.
func usageOrError(err error) error {
	if errors.Is(err, config.ErrInvalid) {
		return usageError(err.Error())
	}
	return err
}

func runOutboxStatus(ctx context.Context, cio cmdIO, o *outboxFlags) error {
	if o.schema == "" {
		return usageError("-schema is empty; name the schema of the outbox tables")
	}
	pool, err := o.connect(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	boxes, err := o.outboxes(ctx, pool)
	if err != nil {
		return err
	}
	statuses := make([]outbox.Status, len(boxes))
	for i, b := range boxes {
		if statuses[i], err = b.Status(ctx); err != nil {
			return err
		}
	}
	if o.json {
		return writeJSON(cio.stdout, jsonStatuses(statuses))
	}
	return statusTable(cio.stdout, statuses)
}
