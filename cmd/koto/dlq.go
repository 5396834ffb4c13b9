package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/koto-dev/watermill-koto/internal/config"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/deadletter"
	"github.com/koto-dev/watermill-koto/internal/cli"
)

func dlqCommand() command {
	return command{summary: "list, show, replay and discard the dead letters of a consumer group", run: runDLQ}
}

// dlqSubcommand is one of list, show, replay and discard.
type dlqSubcommand struct {
	usage   string // after "koto dlq "
	summary string
	filters bool // takes the filter flags
	run     func(ctx context.Context, cio cmdIO, d *dlqFlags) error
}

func dlqSubcommands() map[string]dlqSubcommand {
	return map[string]dlqSubcommand{
		"list": {
			usage:   "list -group G [filters] [-json]",
			summary: "one line per dead letter: position, failed at, type, error class, UUID, original position, state, cause, reason",
			filters: true, run: runList,
		},
		"show": {
			usage:   "show -group G [-json] PARTITION/OFFSET | UUID",
			summary: "one dead letter whole: metadata and payload",
			run:     runShow,
		},
		"replay": {
			usage:   "replay -group G [filters] [-dry-run] [-progress] [-v] [-json]",
			summary: "send the selected dead letters back to their original topic and partition, each once",
			filters: true, run: runResolve(false),
		},
		"discard": {
			usage:   "discard -group G [filters] [-dry-run] [-progress] [-v] [-json]",
			summary: "record the selected dead letters as discarded, so that no replay sends them; nothing is deleted",
			filters: true, run: runResolve(true),
		},
	}
}

func runDLQ(ctx context.Context, cio cmdIO, args []string) error {
	sub, err := pickSubcommand("dlq", dlqSubcommands(), func(s dlqSubcommand) string { return s.summary }, args, cio.stdout)
	if err != nil {
		return err
	}
	d, err := parseDLQFlags(args[0], sub, cio, args[1:])
	if err == nil {
		err = d.explainNoTopic(ctx, sub.run(ctx, cio, d))
	}
	return cli.In("koto dlq "+args[0], err)
}

// explainNoTopic adds to an error for a dead-letter topic that does not
// exist which groups have one.
func (d *dlqFlags) explainNoTopic(ctx context.Context, err error) error {
	if !errors.Is(err, deadletter.ErrNoTopic) {
		return err
	}
	cfg, cerr := d.kafka.config()
	if cerr != nil {
		return err
	}
	groups, gerr := deadletter.Groups(ctx, cfg)
	switch {
	case gerr != nil:
		return errors.Join(err, gerr)
	case len(groups) == 0:
		return fmt.Errorf("%w: group %s has dead-lettered nothing, or the name is misspelt; no group on %s has a dead-letter topic",
			err, d.group, strings.Join(cfg.Brokers, ","))
	}
	return fmt.Errorf("%w: group %s has dead-lettered nothing, or the name is misspelt; the groups with a dead-letter topic: %s",
		err, d.group, strings.Join(groups, ", "))
}

// dlqFlags are the settings of a dlq subcommand.
type dlqFlags struct {
	kafka                     kafkaFlags
	group, topic, replayGroup string
	mapping                   string
	json                      bool
	filter                    filterFlags
	// replay and discard only
	dryRun, verbose bool
	progress        optionalBool
	batch           int

	args []string // positional
}

func parseDLQFlags(name string, sub dlqSubcommand, cio cmdIO, args []string) (*dlqFlags, error) {
	d := &dlqFlags{}
	fs := subcommandFlags("dlq "+sub.usage, sub.summary)
	d.kafka.register(fs, cio.getenv)
	fs.StringVar(&d.group, "group", "", "the consumer group whose dead letters these are, e.g. payments.order-placed-consumer (required)")
	fs.StringVar(&d.topic, "topic", "", "the dead-letter topic (default <group>.dlq)")
	fs.StringVar(&d.replayGroup, "replay-group", "", "the consumer group that records replays and discards (default <group>.dlq-replay)")
	fs.StringVar(&d.mapping, "mapping", "", "read every record in this mapping: watermill, cloudevents or wolverine (default: each record's own, found from its headers)")
	fs.BoolVar(&d.json, "json", false, "print JSON for scripts instead of text")
	if sub.filters {
		d.filter.register(fs)
	}
	switch name {
	case "replay":
		fs.BoolVar(&d.dryRun, "dry-run", false, "list what would be sent; send and record nothing")
		fs.BoolVar(&d.verbose, "v", false, "print a line for every dead letter sent")
		fs.IntVar(&d.batch, "batch", 0, "dead letters sent per produce and recorded per commit, the most a crash can send twice (0: 100)")
	case "discard":
		fs.BoolVar(&d.dryRun, "dry-run", false, "list what would be discarded; record nothing")
		fs.BoolVar(&d.verbose, "v", false, "print a line for every dead letter discarded")
		fs.IntVar(&d.batch, "batch", 0, "dead letters recorded per commit (0: 100)")
	}
	if name == "replay" || name == "discard" {
		fs.Var(&d.progress, "progress", "show a progress bar on stderr (default: when stderr is a terminal; -progress=false turns it off)")
	}
	var err error
	if d.args, err = parseInterspersed(fs, cio.stdout, args); err != nil {
		return nil, err
	}
	if d.group == "" {
		return nil, usageError("-group is required, e.g. -group payments.order-placed-consumer")
	}
	return d, nil
}

// parseInterspersed parses flags that come before, between or after the
// positional arguments, which it returns, as cli.Parse does.
func parseInterspersed(fs *flag.FlagSet, stdout io.Writer, args []string) ([]string, error) {
	var positional []string
	for {
		if err := cli.Parse(fs, stdout, args); err != nil {
			return nil, err
		}
		if fs.NArg() == 0 {
			return positional, nil
		}
		positional = append(positional, fs.Arg(0))
		args = fs.Args()[1:]
	}
}

// openQueue connects to the dead-letter topic that d names.
func (d *dlqFlags) openQueue() (*deadletter.Queue, error) {
	cfg, err := d.kafka.config()
	if err != nil {
		return nil, err
	}
	q, err := deadletter.NewQueue(deadletter.Config{
		Broker: cfg, Mapping: broker.Mapping(d.mapping), ConsumerGroup: d.group, Topic: d.topic, ReplayGroup: d.replayGroup, BatchSize: d.batch,
	})
	if errors.Is(err, config.ErrInvalid) {
		return nil, usageError(err.Error())
	}
	return q, err
}

// openFiltered checks that subcommand name got no arguments and returns
// the queue and the filter that d names.
func (d *dlqFlags) openFiltered(name string) (*deadletter.Queue, deadletter.Filter, error) {
	if len(d.args) > 0 {
		return nil, deadletter.Filter{}, usageError(fmt.Sprintf("takes no arguments, got %q", d.args))
	}
	f, err := d.filter.filter()
	if err != nil {
		return nil, f, err
	}
	q, err := d.openQueue()
	return q, f, err
}
