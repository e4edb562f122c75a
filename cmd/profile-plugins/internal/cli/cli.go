package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// Exit statuses every subcommand keeps to; plan and check also use ExitAttention.
const (
	// ExitOK: done, and nothing needs attention.
	ExitOK = 0
	// ExitError: bad input (flags, files, configuration) or the command could not finish.
	ExitError = 1
	// ExitAttention: done, and what it found needs the admin (plan and check only).
	ExitAttention = 2
)

// Program is the binary's name, as help texts and error hints say it.
const Program = "profile-plugins"

// Help is what `profile-plugins <command> --help` prints besides the flags.
type Help struct {
	// Command is the subcommand's name.
	Command string
	// Args follows "[flags]" in the usage line, such as "[FILE...]".
	Args string
	// Description is one or more paragraphs.
	Description string
	// Examples are lines as a shell shows them: "# what it does" comments, then commands.
	Examples string
	// ExitStatus lists the statuses, one "N  meaning" per line.
	ExitStatus string
}

// NewFlagSet returns a flag set that prints nothing itself: Parse says what went wrong or
// prints the help, so errors go to stderr and help to stdout, as kubectl does.
func NewFlagSet(command string) *flag.FlagSet {
	fs := flag.NewFlagSet(command, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// UsageError is a flag or an argument the command does not take.
type UsageError struct{ Err error }

func (e UsageError) Error() string { return e.Err.Error() }

func (e UsageError) Unwrap() error { return e.Err }

// Parse parses args into fs: flag.ErrHelp for -h or --help, a UsageError for a bad flag or,
// unless the command takes arguments (h.Args), any argument.
func (h Help) Parse(fs *flag.FlagSet, args []string) error {
	err := fs.Parse(args)
	switch {
	case errors.Is(err, flag.ErrHelp):
		return err
	case err != nil:
		return UsageError{err}
	case h.Args == "" && fs.NArg() > 0:
		return UsageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	return nil
}

// Exit reports the command's outcome and returns its exit status: nil is ExitOK; flag.ErrHelp
// prints the help (with fs's flags) on stdout, ExitOK; a UsageError is said on stderr with where
// the help is, and any other error on one line, ExitError.
func (h Help) Exit(fs *flag.FlagSet, err error, stdout, stderr io.Writer) int {
	var usage UsageError
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, flag.ErrHelp):
		h.Write(stdout, fs)
		return ExitOK
	case errors.As(err, &usage):
		h.Fail(stderr, err)
	default:
		Errorf(stderr, h.Command, err)
	}
	return ExitError
}

// Fail writes a usage error on stderr: the command's name, the error on one line, and where the
// help is.
func (h Help) Fail(stderr io.Writer, err error) {
	fmt.Fprintf(stderr, "%s: %s\nRun '%s %s --help' for usage.\n", h.Command, OneLine(err), Program, h.Command)
}

// Write prints the help: usage line, description, examples, flags and exit statuses.
func (h Help) Write(w io.Writer, fs *flag.FlagSet) {
	usage := fmt.Sprintf("%s %s [flags]", Program, h.Command)
	if h.Args != "" {
		usage += " " + h.Args
	}
	fmt.Fprintf(w, "Usage:\n  %s\n\n%s\n", usage, strings.TrimSpace(h.Description))
	if h.Examples != "" {
		fmt.Fprintf(w, "\nExamples:\n%s\n", indent(strings.TrimSpace(h.Examples), "  "))
	}
	fmt.Fprintf(w, "\nFlags (-name and --name are the same):\n")
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
	if h.ExitStatus != "" {
		fmt.Fprintf(w, "\nExit status:\n%s\n", indent(strings.TrimSpace(h.ExitStatus), "  "))
	}
}

// OneLine keeps an error on one line: the admin greps for it, and CI logs show it whole.
func OneLine(err error) string {
	return strings.ReplaceAll(err.Error(), "\n", "; ")
}

// Errorf writes "<command>: <error>" on one line to w.
func Errorf(w io.Writer, command string, err error) {
	fmt.Fprintln(w, command+": "+OneLine(err))
}

func indent(s, prefix string) string {
	lines := strings.Split(s, "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n")
}
