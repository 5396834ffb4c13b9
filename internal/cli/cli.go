// Package cli is the command-line convention of the project's commands
// (koto, koto-kafka, koto-bench): -h prints the usage on stdout and exits
// 0; a wrong command line exits 2 with the error and one line pointing at
// -h on stderr, not the usage; any other error exits 1.
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// ErrUsage is wrapped by the error of a wrong command line.
var ErrUsage = errors.New("usage error")

// usageError is a wrong command line of cmd, e.g. "koto dlq list".
type usageError struct {
	cmd, msg string
}

func (e *usageError) Error() string {
	if e.cmd == "" {
		return e.msg
	}
	return e.cmd + ": " + e.msg
}

func (e *usageError) Is(target error) bool { return target == ErrUsage }

// Usagef returns a usage error saying what is wrong; [In] names its
// command.
func Usagef(format string, a ...any) error {
	return &usageError{msg: fmt.Sprintf(format, a...)}
}

// In names cmd as the command of a usage error err that names none yet,
// so that [ExitCode] points at the right -h. Other errors pass unchanged.
func In(cmd string, err error) error {
	var ue *usageError
	if errors.As(err, &ue) && ue.cmd == "" {
		return &usageError{cmd: cmd, msg: ue.msg}
	}
	return err
}

// NewFlagSet returns a flag set for the command cmd ("koto-bench store")
// whose usage is its name and flags. Parse it with [Parse].
func NewFlagSet(cmd string) *flag.FlagSet {
	fs := flag.NewFlagSet(cmd, flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: %s [flags]\nflags:\n", cmd)
		fs.PrintDefaults()
	}
	return fs
}

// Parse parses args into fs, a flag set named for its command ("koto dlq
// list"). Nothing is printed for a wrong flag: the error is a usage error
// of fs's command. Help (-h, -help) prints fs.Usage on stdout and returns
// flag.ErrHelp.
func Parse(fs *flag.FlagSet, stdout io.Writer, args []string) error {
	usage := fs.Usage
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	fs.Usage = usage
	switch {
	case errors.Is(err, flag.ErrHelp):
		fs.SetOutput(stdout)
		fs.Usage()
		return flag.ErrHelp
	case err != nil:
		return &usageError{cmd: fs.Name(), msg: err.Error()}
	}
	return nil
}

// IsHelp reports whether arg asks for help.
func IsHelp(arg string) bool {
	switch arg {
	case "-h", "-help", "--help":
		return true
	}
	return false
}

// ExitCode prints err on stderr as the convention says and returns the
// exit status: 0 for nil or flag.ErrHelp (the usage is printed already);
// 2 for a usage error, with a line pointing at the -h of its command, or
// of prog when it names none; 1 for any other error, after "prog:".
func ExitCode(err error, prog string, stderr io.Writer) int {
	var ue *usageError
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		return 0
	case errors.As(err, &ue):
		cmd := ue.cmd
		if cmd == "" {
			cmd = prog
		}
		fmt.Fprintf(stderr, "%s: %s\nrun '%s -h' for usage\n", cmd, oneLine(ue.msg), cmd)
		return 2
	}
	fmt.Fprintf(stderr, "%s: %v\n", prog, err)
	return 1
}

// oneLine keeps a usage error's message to one line.
func oneLine(s string) string {
	return strings.ReplaceAll(strings.TrimSpace(s), "\n", "; ")
}
