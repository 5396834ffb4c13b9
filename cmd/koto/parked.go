package main

import (
	"context"
	"fmt"
	"io"
	"strconv"
	"text/tabwriter"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/koto-dev/watermill-koto/internal/cli"
	"github.com/koto-dev/watermill-koto/internal/pgschema"
	"github.com/koto-dev/watermill-koto/outbox"
	"github.com/koto-dev/watermill-koto/parking"
)

func parkedCommand() command {
	return command{summary: "show the messages parked to be tried again later, run one now, or dead-letter it", run: runParked}
}

// parkedSubcommand is one subcommand of koto parked.
type parkedSubcommand struct {
	usage   string // after "koto parked "
	summary string
	args    int // the positional arguments it takes: 0, or 1 (an ID)
	run     func(ctx context.Context, cio cmdIO, p *parkedFlags) error
}

func parkedSubcommands() map[string]parkedSubcommand {
	common := "[-database-url URL] [-schema S] [-table T] [-outbox O]"
	return map[string]parkedSubcommand{
		"status": {usage: "status " + common + " [-json]",
			summary: "per parking table and consumer group: keys, messages, the oldest, the next due", run: runParkedStatus},
		"list": {usage: "list -group G " + common + " [-limit N] [-json]",
			summary: "a group's parked messages, each key's in the order they come back", run: runParkedList},
		"run": {usage: "run " + common + " ID", args: 1,
			summary: "bring the first parked message of a key back now", run: runParkedNow},
		"dead-letter": {usage: "dead-letter " + common + " ID", args: 1,
			summary: "bring the first parked message of a key back to be dead-lettered, without a handler call", run: runParkedDeadLetter},
	}
}

func runParked(ctx context.Context, cio cmdIO, args []string) error {
	sub, err := pickSubcommand("parked", parkedSubcommands(), func(s parkedSubcommand) string { return s.summary }, args, cio.stdout)
	if err != nil {
		return err
	}
	p, err := parseParkedFlags(sub, cio, args[1:])
	if err == nil {
		err = sub.run(ctx, cio, p)
	}
	return cli.In("koto parked "+args[0], err)
}

// parkedFlags are the settings of a parked subcommand.
type parkedFlags struct {
	outboxFlags // -database-url, -schema, -table, -json
	outbox      string
	group       string
	limit       int
	id          string
}

func parseParkedFlags(sub parkedSubcommand, cio cmdIO, args []string) (*parkedFlags, error) {
	p := &parkedFlags{}
	fs := subcommandFlags("parked "+sub.usage, sub.summary)
	registerDatabaseURL(fs, &p.databaseURL)
	fs.StringVar(&p.schema, "schema", "koto", "the schema of the parking tables (parking.Config.Schema)")
	fs.StringVar(&p.table, "table", "", "one parking table (parking.Config.Table); default: every parking table of -schema")
	fs.StringVar(&p.outbox, "outbox", "outbox", "the outbox table of -schema that brings parked messages back (outbox.Config.Table; run, dead-letter)")
	fs.BoolVar(&p.json, "json", false, "print JSON for scripts instead of text")
	fs.StringVar(&p.group, "group", "", "the consumer group (list)")
	fs.IntVar(&p.limit, "limit", 1000, "the most messages list shows")
	rest, err := parseInterspersed(fs, cio.stdout, args)
	switch {
	case err != nil:
		return nil, err
	case len(rest) != sub.args:
		return nil, usageError(fmt.Sprintf("takes %d argument(s), got %q", sub.args, rest))
	case p.schema == "":
		return nil, usageError("-schema is empty; name the schema of the parking tables")
	case p.limit < 1:
		return nil, usageError("-limit must be at least 1")
	}
	if sub.args == 1 {
		p.id = rest[0]
	}
	p.databaseURL = databaseURL(p.databaseURL, cio.getenv)
	return p, nil
}

// stores returns the stores of the tables the flags name: -table, or
// every parking table of -schema, on the outbox -outbox, which schedules
// what comes back.
func (p *parkedFlags) stores(ctx context.Context, pool *pgxpool.Pool) ([]*parking.Store, error) {
	cfgs := []parking.Config{{Schema: p.schema, Table: p.table}}
	if p.table == "" {
		var err error
		if cfgs, err = parking.FindTables(ctx, pool, p.schema); err != nil {
			return nil, usageOrError(err)
		}
		if len(cfgs) == 0 {
			return nil, fmt.Errorf("no parking table in schema %s: check -schema, or -database-url", pgschema.QuoteIdent(p.schema))
		}
	}
	box, err := outbox.New(pool, outbox.Config{Schema: p.schema, Table: p.outbox})
	if err != nil {
		return nil, usageOrError(err)
	}
	stores := make([]*parking.Store, len(cfgs))
	for i, cfg := range cfgs {
		if stores[i], err = parking.NewStore(pool, box, cfg); err != nil {
			return nil, usageOrError(err)
		}
	}
	return stores, nil
}

// withStores runs fn on the stores the flags name.
func (p *parkedFlags) withStores(ctx context.Context, fn func([]*parking.Store) error) error {
	pool, err := p.connect(ctx)
	if err != nil {
		return err
	}
	defer pool.Close()
	stores, err := p.stores(ctx, pool)
	if err != nil {
		return err
	}
	return fn(stores)
}

func runParkedStatus(ctx context.Context, cio cmdIO, p *parkedFlags) error {
	return p.withStores(ctx, func(stores []*parking.Store) error {
		all, err := each(stores, func(s *parking.Store) ([]parking.Status, error) { return s.Status(ctx) })
		switch {
		case err != nil:
			return err
		case p.json:
			return writeJSON(cio.stdout, jsonParkedStatuses(all))
		}
		return parkedStatusTable(cio.stdout, all)
	})
}

func runParkedList(ctx context.Context, cio cmdIO, p *parkedFlags) error {
	if p.group == "" {
		return usageError("-group is empty; name the consumer group")
	}
	return p.withStores(ctx, func(stores []*parking.Store) error {
		all, err := each(stores, func(s *parking.Store) ([]parking.Entry, error) { return s.List(ctx, p.group, p.limit) })
		switch {
		case err != nil:
			return err
		case p.json:
			return writeJSON(cio.stdout, jsonParkedEntries(all))
		}
		return parkedListTable(cio.stdout, all)
	})
}

// each returns what read returns for each of stores, in order.
func each[T any](stores []*parking.Store, read func(*parking.Store) ([]T, error)) ([]T, error) {
	var all []T
	for _, s := range stores {
		got, err := read(s)
		if err != nil {
			return nil, err
		}
		all = append(all, got...)
	}
	return all, nil
}

func runParkedNow(ctx context.Context, cio cmdIO, p *parkedFlags) error {
	return p.operate(ctx, cio, "runs now", (*parking.Store).RunNow)
}

func runParkedDeadLetter(ctx context.Context, cio cmdIO, p *parkedFlags) error {
	return p.operate(ctx, cio, "comes back to be dead-lettered", (*parking.Store).DeadLetter)
}

// operate does op to the message p.id in the first table that has it.
func (p *parkedFlags) operate(ctx context.Context, cio cmdIO, done string, op func(*parking.Store, context.Context, string) error) error {
	return p.withStores(ctx, func(stores []*parking.Store) error {
		var err error
		for _, s := range stores {
			if err = op(s, ctx, p.id); err == nil {
				fmt.Fprintf(cio.stdout, "%s %s\n", p.id, done)
				return nil
			}
		}
		return err
	})
}

// parkedStatusTable writes one line per table and group.
func parkedStatusTable(w io.Writer, statuses []parking.Status) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TABLE\tGROUP\tKEYS\tMESSAGES\tOLDEST\tNEXT DUE")
	for _, s := range statuses {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\t%s\n", s.Table, s.Group, s.Keys, s.Messages, orDash(formatTime(s.Oldest)), orDash(formatTime(s.NextDue)))
	}
	return tw.Flush()
}

// parkedListTable writes one line per parked message.
func parkedListTable(w io.Writer, entries []parking.Entry) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tTOPIC\tPARTITION/OFFSET\tKEY\tPARKINGS\tDUE\tLAST ERROR")
	for _, e := range entries {
		due := "behind"
		if !e.DueAt.IsZero() {
			due = formatTime(e.DueAt)
		}
		fmt.Fprintf(tw, "%s\t%s\t%d/%d\t%s\t%d\t%s\t%s\n", e.ID, e.Position.Topic, e.Position.Partition, e.Position.Offset,
			orDash(strconv.Quote(string(e.Position.Key))), e.Parkings, due, orDash(truncated(e.LastError(), 80)))
	}
	return tw.Flush()
}

// truncated cuts s to n bytes, marked.
func truncated(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

// shownParkedStatus is the JSON of one table's group.
type shownParkedStatus struct {
	Table    string     `json:"table"`
	Group    string     `json:"group"`
	Keys     int64      `json:"keys"`
	Messages int64      `json:"messages"`
	Oldest   *time.Time `json:"oldest"`
	NextDue  *time.Time `json:"next_due"`
}

func jsonParkedStatuses(statuses []parking.Status) []shownParkedStatus {
	out := make([]shownParkedStatus, len(statuses))
	for i, s := range statuses {
		out[i] = shownParkedStatus{Table: s.Table, Group: s.Group, Keys: s.Keys, Messages: s.Messages,
			Oldest: utcOrNil(s.Oldest), NextDue: utcOrNil(s.NextDue)}
	}
	return out
}

// shownParkedEntry is the JSON of one parked message.
type shownParkedEntry struct {
	ID          string     `json:"id"`
	Group       string     `json:"group"`
	Topic       string     `json:"topic"`
	Partition   int32      `json:"partition"`
	Offset      int64      `json:"offset"`
	Key         string     `json:"key"`
	MessageUUID string     `json:"message_uuid"`
	Parkings    int        `json:"parkings"`
	DueAt       *time.Time `json:"due_at"`
	ParkedAt    time.Time  `json:"parked_at"`
	LastError   string     `json:"last_error"`
	DeadLetter  bool       `json:"dead_letter"`
}

func jsonParkedEntries(entries []parking.Entry) []shownParkedEntry {
	out := make([]shownParkedEntry, len(entries))
	for i, e := range entries {
		out[i] = shownParkedEntry{ID: e.ID, Group: e.Group, Topic: e.Position.Topic, Partition: e.Position.Partition,
			Offset: e.Position.Offset, Key: string(e.Position.Key), MessageUUID: e.Message.UUID, Parkings: e.Parkings,
			DueAt: utcOrNil(e.DueAt), ParkedAt: e.ParkedAt.UTC(), LastError: e.LastError(), DeadLetter: e.DeadLetter}
	}
	return out
}
