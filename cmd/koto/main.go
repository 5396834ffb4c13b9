// Command koto operates a watermill-koto deployment: it lists, shows,
// replays and discards the dead letters of a consumer group, shows the
// backlog of the outbox tables of a database, and serves the operations
// console.
//
// Usage:
//
//	koto dlq list    -group G [filters] [-json]
//	koto dlq show    -group G [-json] PARTITION/OFFSET | UUID
//	koto dlq replay  -group G [filters] [-dry-run] [-progress] [-v] [-json]
//	koto dlq discard -group G [filters] [-dry-run] [-progress] [-v] [-json]
//	koto outbox status [-database-url URL] [-schema S] [-table T] [-json]
//	koto parked status [-database-url URL] [-schema S] [-table T] [-json]
//	koto parked list -group G [-database-url URL] [-schema S] [-table T] [-limit N] [-json]
//	koto parked run|dead-letter [-database-url URL] [-schema S] [-table T] [-outbox O] ID
//	koto console [-listen ADDR] [-token NAME:SECRET] [-read-only] [-metrics] [-mapping M] [-database-url URL] [-schema S]
//
// The dlq commands connect with the same Kafka settings as the services:
// -brokers (default $KAFKA_BROKERS), SASL (-sasl-user and -sasl-mechanism,
// default $KAFKA_SASL_USER and $KAFKA_SASL_MECHANISM, and the password in
// $KAFKA_SASL_PASSWORD or -sasl-password) and TLS (-tls, -tls-ca,
// -tls-server-name, -tls-insecure-skip-verify). Flags may come
// before or after the arguments; `koto <command> <subcommand> -h` lists
// them all. -json prints JSON for scripts instead of text.
//
// They read each dead letter in the record mapping its headers show
// (Watermill's, CloudEvents, Wolverine's), so its UUID, type and
// correlation ID are its own whatever the services publish in; -mapping
// watermill|cloudevents|wolverine reads every record in one. The filters
// select by time (-since, -until), -reason text, error -class, -type,
// -uuid, -correlation, -cause (as list -json and the console name a
// cause) and position (-at PARTITION/OFFSET), as the console selects.
//
// replay sends each selected dead letter back to its original topic and
// partition as it was consumed; discard records it as discarded, so that
// no replay sends it, and deletes nothing. Both record what they did in
// the consumer group "<group>.dlq-replay" (-replay-group), so no dead
// letter is sent twice and an interrupted replay resumes; -dry-run says
// what they would do. The deadletter package documents the guarantees.
//
// outbox status connects to -database-url (default $DATABASE_URL, else
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable) and prints, for
// the outbox table -table of -schema (default koto), or for every outbox
// table of -schema, found by its columns: the committed rows waiting, how
// many of them are held behind an older running transaction, when the
// oldest was written, the forwarder's lag and the active forwarder's
// backend, and the messages scheduled, since when and when the next is
// due. Forwarded rows are deleted as the forwarder records its position,
// so the rows waiting are the table's rows and the lag is the age of the
// oldest: the outbox package documents the reading (Outbox.Status). It
// reads with one statement per table, read-only, and gives up after 5 s
// waiting for a table lock or 30 s running.
//
// parked status prints, for each parking table of -schema (or -table) and
// consumer group, the keys with parked messages, the messages, when the
// oldest was parked and when the next comes back; parked list a group's
// parked messages, each key's in the order they come back. parked run
// brings the first of a key back now, parked dead-letter brings it back to
// be dead-lettered by its consumer without a handler call; both schedule
// it in the outbox table -outbox (default outbox) of -schema. The parking
// package documents them.
//
// console serves the console package's pages on -listen (default
// 127.0.0.1:8080) until interrupted: consumer lag, dead letters grouped by
// cause, their replay and discard, the outbox backlog and schedule of
// -schema's tables (default koto; comma-separated for several), and the
// messages parked there, which it runs now or dead-letters as parked run
// and dead-letter do. It connects with the same Kafka flags as dlq, reads
// dead letters as dlq does (-mapping), and takes the same -database-url as
// outbox status. Beyond localhost it needs a token, -token NAME:SECRET
// (repeatable) or $KOTO_CONSOLE_TOKEN (NAME:SECRET,...); on localhost
// without one it answers only requests addressed to localhost. -read-only
// removes every action; -metrics serves /metrics; each replay, discard,
// run and dead letter is logged on stderr with the token's name.
//
// Exit status: 0 on success and for -h, which prints the usage on stdout;
// 2 for a usage error, printed on stderr with the -h that explains it; 1
// for any other error, such as no outbox table or no dead-letter topic.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/koto-dev/watermill-koto/internal/cli"
)

// command is one top-level command: what it does and how to run it with
// its arguments (the ones after its name).
type command struct {
	summary string
	run     func(ctx context.Context, io cmdIO, args []string) error
}

// cmdIO is what a command reads and writes besides its arguments.
type cmdIO struct {
	stdout, stderr io.Writer
	getenv         func(string) string
	// stderrIsTerminal says whether stderr is a terminal, for progress bars.
	stderrIsTerminal bool
}

// commands lists the top-level commands. Each lives in files of its own.
func commands() map[string]command {
	return map[string]command{
		"console": consoleCommand(),
		"dlq":     dlqCommand(),
		"outbox":  outboxCommand(),
		"parked":  parkedCommand(),
	}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cio := cmdIO{stdout: os.Stdout, stderr: os.Stderr, getenv: os.Getenv, stderrIsTerminal: isTerminal(os.Stderr)}
	os.Exit(cli.ExitCode(run(ctx, cio, os.Args[1:]), "koto", cio.stderr))
}

// run runs the command that args name.
func run(ctx context.Context, cio cmdIO, args []string) error {
	cmds := commands()
	usage := usageText("koto <command> <subcommand> [flags]", "commands", cmds, func(c command) string { return c.summary }) +
		"'koto <command> -h' lists its subcommands."
	cmd, err := pick("koto", "command", cmds, args, usage, cio.stdout)
	if err != nil {
		return err
	}
	return cmd.run(ctx, cio, args[1:])
}

// pick returns the command that args[0] names. With -h it prints usage on
// stdout and returns flag.ErrHelp; otherwise a missing or unknown name is
// a usage error of parent.
func pick[C any](parent, what string, cmds map[string]C, args []string, usage string, stdout io.Writer) (C, error) {
	var none C
	names := strings.Join(slices.Sorted(maps.Keys(cmds)), ", ")
	switch {
	case len(args) == 0:
		return none, cli.In(parent, cli.Usagef("no %s given; %ss: %s", what, what, names))
	case cli.IsHelp(args[0]):
		fmt.Fprintln(stdout, strings.TrimRight(usage, "\n"))
		return none, flag.ErrHelp
	case strings.HasPrefix(args[0], "-"):
		return none, cli.In(parent, cli.Usagef("flag provided but not defined: %s (flags come after the %s)", args[0], what))
	}
	cmd, ok := cmds[args[0]]
	if !ok {
		return none, cli.In(parent, cli.Usagef("unknown %s %q; %ss: %s", what, args[0], what, names))
	}
	return cmd, nil
}

// pickSubcommand returns the subcommand of command that args[0] names, as
// pick does.
func pickSubcommand[S any](command string, subs map[string]S, summary func(S) string, args []string, stdout io.Writer) (S, error) {
	usage := usageText("koto "+command+" <subcommand> [flags]", "subcommands", subs, summary) +
		"'koto " + command + " <subcommand> -h' lists its flags."
	return pick("koto "+command, "subcommand", subs, args, usage, stdout)
}

// subcommandFlags returns the flag set of a subcommand, whose -h prints
// its usage line (what follows "koto ": command, subcommand, flags) and
// summary.
func subcommandFlags(usage, summary string) *flag.FlagSet {
	fs := flag.NewFlagSet("koto "+commandOf(usage), flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: koto %s\n  %s\nflags (before or after the arguments):\n", usage, summary)
		fs.PrintDefaults()
	}
	return fs
}

// usageText lists cmds, sorted, with their summaries.
func usageText[C any](synopsis, title string, cmds map[string]C, summary func(C) string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: %s\n%s:\n", synopsis, title)
	for _, name := range slices.Sorted(maps.Keys(cmds)) {
		fmt.Fprintf(&b, "  %-8s %s\n", name, summary(cmds[name]))
	}
	return b.String()
}

// usageError is a wrong command line; the subcommand that returns it
// names itself (cli.In).
func usageError(text string) error {
	return cli.Usagef("%s", strings.TrimRight(text, "\n"))
}

// isTerminal reports whether f is a character device, as a terminal is.
func isTerminal(f *os.File) bool {
	info, err := f.Stat()
	return err == nil && info.Mode()&os.ModeCharDevice != 0
}

// commandOf returns the words of usage before its flags: "dlq list" of
// "dlq list -group G", "console" of "console [-listen ADDR]".
func commandOf(usage string) string {
	var words []string
	for _, w := range strings.Fields(usage) {
		if strings.HasPrefix(w, "-") || strings.HasPrefix(w, "[") {
			break
		}
		words = append(words, w)
	}
	return strings.Join(words, " ")
}
