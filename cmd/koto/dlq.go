package main

import (
	"context"
	"errors"
	"flag"
	"fmt"

	"github.com/koto-dev/watermill-koto/deadletter"
)

func dlqCommand() command {
	return command{summary: "list, show and replay the dead letters of a consumer group", run: runDLQ}
}

// dlqSubcommand is one of list, show and replay.
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
			summary: "one line per dead letter: position, failed at, type, error class, UUID, original position, reason",
			filters: true, run: runList,
		},
		"show": {
			usage:   "show -group G [-json] PARTITION/OFFSET | UUID",
			summary: "one dead letter whole: metadata and payload",
			run:     runShow,
		},
		"replay": {
			usage:   "replay -group G [filters] [-dry-run] [-progress] [-v] [-json]",
			summary: "send the selected dead letters back to their original topic, each once",
			filters: true, run: runReplay,
		},
	}
}

func runDLQ(ctx context.Context, cio cmdIO, args []string) error {
	sub, err := pickSubcommand("dlq", dlqSubcommands(), func(s dlqSubcommand) string { return s.summary }, args)
	if err != nil {
		return err
	}
	d, err := parseDLQFlags(args[0], sub, cio, args[1:])
	if err != nil {
		return err
	}
	return sub.run(ctx, cio, d)
}

// dlqFlags are the settings of a dlq subcommand.
type dlqFlags struct {
	kafka                     kafkaFlags
	group, topic, replayGroup string
	json                      bool
	filter                    filterFlags
	// replay only
	dryRun, verbose bool
	progress        optionalBool
	batch           int

	args []string // positional
}

func parseDLQFlags(name string, sub dlqSubcommand, cio cmdIO, args []string) (*dlqFlags, error) {
	d := &dlqFlags{}
	fs := subcommandFlags("dlq "+sub.usage, sub.summary, cio)
	d.kafka.register(fs, cio.getenv)
	fs.StringVar(&d.group, "group", "", "the consumer group whose dead letters these are, e.g. payments.order-placed-consumer (required)")
	fs.StringVar(&d.topic, "topic", "", "the dead-letter topic (default <group>.dlq)")
	fs.StringVar(&d.replayGroup, "replay-group", "", "the consumer group that records replays (default <group>"+deadletter.DefaultReplayGroupSuffix+")")
	fs.BoolVar(&d.json, "json", false, "print JSON for scripts instead of text")
	if sub.filters {
		d.filter.register(fs)
	}
	if name == "replay" {
		fs.BoolVar(&d.dryRun, "dry-run", false, "list what would be sent; send and record nothing")
		fs.Var(&d.progress, "progress", "show a progress bar on stderr (default: when stderr is a terminal; -progress=false turns it off)")
		fs.BoolVar(&d.verbose, "v", false, "print a line for every dead letter sent")
		fs.IntVar(&d.batch, "batch", deadletter.DefaultBatchSize, "dead letters sent per produce and recorded per commit: the most a crash can send twice")
	}
	var err error
	if d.args, err = parseInterspersed(fs, args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil, err
		}
		return nil, errShown
	}
	if d.group == "" {
		return nil, usageError("koto dlq " + name + ": -group is required, e.g. -group payments.order-placed-consumer")
	}
	return d, nil
}

// errShown is a usage error the flag package has already printed.
var errShown = fmt.Errorf("%w: see above", errUsage)

// parseNoArgs parses the flags of command, which takes no arguments.
func parseNoArgs(fs *flag.FlagSet, args []string, command string) error {
	rest, err := parseInterspersed(fs, args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return err
	case err != nil:
		return errShown
	case len(rest) > 0:
		return usageError(fmt.Sprintf("%s takes no arguments, got %q", command, rest))
	}
	return nil
}

// parseInterspersed parses flags that come before, between or after the
// positional arguments, which it returns.
func parseInterspersed(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
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
		Broker: cfg, ConsumerGroup: d.group, Topic: d.topic, ReplayGroup: d.replayGroup, BatchSize: d.batch,
	})
	if errors.Is(err, deadletter.ErrInvalidConfig) {
		return nil, usageError(err.Error())
	}
	return q, err
}

// openFiltered checks that subcommand name got no arguments and returns
// the queue and the filter that d names.
func (d *dlqFlags) openFiltered(name string) (*deadletter.Queue, deadletter.Filter, error) {
	if len(d.args) > 0 {
		return nil, deadletter.Filter{}, usageError(fmt.Sprintf("koto dlq %s takes no arguments, got %q", name, d.args))
	}
	f, err := d.filter.filter()
	if err != nil {
		return nil, f, err
	}
	q, err := d.openQueue()
	return q, f, err
}
