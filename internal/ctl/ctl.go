// Package ctl is vineyardctl, the command-line client of vineyardd:
// cmd/vineyardctl only calls Main. Every command talks to one daemon through
// internal/client, over its UNIX socket (--socket, VINEYARD_IPC_SOCKET) or
// its TCP listener (--endpoint, VINEYARD_RPC_ENDPOINT), and prints for a
// human by default or one JSON document with -o json.
//
// Exit codes (the contract scripts rely on; docs and --help list them):
//
//	0  success
//	1  the operation failed (the daemon refused it, a file could not be written, ...)
//	2  usage: an unknown command or flag, a missing or malformed argument
//	3  the daemon could not be reached, or the connection broke
//	4  no such object or name
//	5  the object cannot be written in the format asked (get), or the file
//	   is not one put understands
package ctl

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/v6d-io/v6d-go/internal/client"
	"github.com/v6d-io/v6d-go/internal/status"
)

// Exit codes of Main.
const (
	ExitOK          = 0
	ExitFailed      = 1
	ExitUsage       = 2
	ExitUnreachable = 3
	ExitNotFound    = 4
	ExitUnsupported = 5
)

// Version is vineyardctl's version, set by the linker (-X).
var Version = "dev"

// usageError is a bad command line: exit code 2, and the command's usage.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// errUnsupported marks a conversion the command cannot make: exit code 5.
var errUnsupported = errors.New("unsupported")

func unsupportedf(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errUnsupported, fmt.Sprintf(format, args...))
}

// command is one subcommand: its flags are added to fs, run does the work.
type command struct {
	name, args, summary string
	// flags adds the command's own flags to fs and returns the function
	// that runs it with the positional arguments.
	setup func(fs *flag.FlagSet, e *env) func(args []string) error
}

var commands = []command{
	{"ls", "[PATTERN]", "list objects: PATTERN (a glob) matches an id or a name; --type, --limit", setupLs},
	{"inspect", "ID|NAME", "the object's tree: members, sizes, where its blobs are", setupInspect},
	{"get", "ID|NAME -o FILE", "write an object to a file: .npy (tensors), .parquet (tables, dataframes), raw bytes", setupGet},
	{"put", "FILE", "store a file: .npy as a vineyard::Tensor, anything else as one blob; prints the id", setupPut},
	{"delete", "ID|NAME...", "delete objects (--force: and what uses them; --deep: and members no other uses)", setupDelete},
	{"status", "", "the daemon's status (memory, connections) and the cluster's instances", setupStatus},
	{"watch", "", "print objects as they appear and disappear (polls; --interval)", setupWatch},
	{"version", "", "print vineyardctl's version and the daemon's", setupVersion},
}

// env is what every command shares: where to connect, how to print.
type env struct {
	stdout, stderr io.Writer
	socket         string
	endpoint       string
	authFile       string
	timeout        time.Duration
	format         string // "text" or "json"
	// interrupt, when not nil, is closed to stop a command that runs until
	// interrupted (watch); Main's caller wires it to SIGINT/SIGTERM.
	interrupt <-chan struct{}
}

// addConnFlags adds the flags every command takes.
func (e *env) addConnFlags(fs *flag.FlagSet, formatFlag bool) {
	fs.StringVar(&e.socket, "socket", e.socket, "UNIX socket of the daemon (default $"+client.SocketEnv+")")
	fs.StringVar(&e.endpoint, "endpoint", e.endpoint, "HOST:PORT of the daemon's TCP listener instead of the socket (default $"+client.RPCEndpointEnv+" when no socket is known)")
	fs.StringVar(&e.authFile, "rpc-auth-file", e.authFile, "file holding the secret the TCP listener requires (the daemon's --rpc-auth-file; default $"+client.RPCSecretEnv+")")
	fs.DurationVar(&e.timeout, "timeout", e.timeout, "bound on connecting and on each request")
	if formatFlag {
		fs.StringVar(&e.format, "o", e.format, "output: text or json")
		fs.StringVar(&e.format, "output", e.format, "output: text or json")
	}
}

// connect dials the daemon: --endpoint, else --socket, else
// VINEYARD_IPC_SOCKET, else VINEYARD_RPC_ENDPOINT.
func (e *env) connect() (*client.Client, error) {
	opts := []client.Option{client.WithTimeout(e.timeout)}
	endpoint := e.endpoint
	if endpoint == "" && e.socket == "" && os.Getenv(client.SocketEnv) == "" {
		endpoint = os.Getenv(client.RPCEndpointEnv)
	}
	if endpoint == "" {
		if e.socket == "" && os.Getenv(client.SocketEnv) == "" {
			return nil, status.Errorf(status.ConnectionFailed,
				"no daemon given: use --socket PATH or --endpoint HOST:PORT, or set %s", client.SocketEnv)
		}
		return client.Connect(e.socket, opts...)
	}
	if e.authFile != "" {
		b, err := os.ReadFile(e.authFile)
		if err != nil {
			return nil, usagef("--rpc-auth-file: %v", err)
		}
		secret := strings.TrimSpace(string(b))
		if secret == "" {
			return nil, usagef("--rpc-auth-file %s is empty", e.authFile)
		}
		opts = append(opts, client.WithSecret(secret))
	}
	return client.ConnectRPC(endpoint, opts...)
}

// Main runs vineyardctl with args (without the program name) and returns
// its exit code. interrupt, when not nil, stops watch when closed.
func Main(args []string, stdout, stderr io.Writer, interrupt <-chan struct{}) int {
	e := &env{stdout: stdout, stderr: stderr, timeout: 30 * time.Second, format: "text", interrupt: interrupt}
	// Connection flags may come before the command too.
	global := flag.NewFlagSet("vineyardctl", flag.ContinueOnError)
	global.SetOutput(io.Discard)
	e.addConnFlags(global, true)
	help := global.Bool("help", false, "")
	global.BoolVar(help, "h", false, "")
	if err := global.Parse(args); err != nil {
		fmt.Fprintf(stderr, "vineyardctl: %v\n\n", err)
		usage(stderr)
		return ExitUsage
	}
	rest := global.Args()
	if *help || len(rest) == 0 {
		usage(stdout)
		if *help {
			return ExitOK
		}
		return ExitUsage
	}
	if rest[0] == "help" {
		if len(rest) > 1 {
			if c := lookup(rest[1]); c != nil {
				fs, _ := c.flagSet(e)
				commandUsage(stdout, c, fs)
				return ExitOK
			}
		}
		usage(stdout)
		return ExitOK
	}
	c := lookup(rest[0])
	if c == nil {
		fmt.Fprintf(stderr, "vineyardctl: unknown command %q\n\n", rest[0])
		usage(stderr)
		return ExitUsage
	}
	fs, run := c.flagSet(e)
	pos, err := parseInterleaved(fs, rest[1:])
	if errors.Is(err, flag.ErrHelp) {
		commandUsage(stdout, c, fs)
		return ExitOK
	}
	if err != nil {
		err = &usageError{err.Error()}
	}
	if err == nil && e.format != "text" && e.format != "json" {
		err = usagef("-o %s: the output is text or json", e.format)
	}
	if err == nil {
		err = run(pos)
	}
	if err == nil {
		return ExitOK
	}
	code := exitCode(err)
	fmt.Fprintf(stderr, "vineyardctl %s: %v\n", c.name, err)
	if code == ExitUsage {
		fmt.Fprintln(stderr)
		commandUsage(stderr, c, fs)
	}
	return code
}

func lookup(name string) *command {
	for i := range commands {
		if commands[i].name == name {
			return &commands[i]
		}
	}
	return nil
}

func (c *command) flagSet(e *env) (*flag.FlagSet, func([]string) error) {
	fs := flag.NewFlagSet(c.name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	// get's -o is its output file; every other command's is the format.
	e.addConnFlags(fs, c.name != "get")
	return fs, c.setup(fs, e)
}

// parseInterleaved parses flags that may follow positional arguments
// ("get ID -o FILE"); everything after "--" is positional.
func parseInterleaved(fs *flag.FlagSet, args []string) ([]string, error) {
	var tail []string // after "--"
	for i, a := range args {
		if a == "--" {
			args, tail = args[:i], args[i+1:]
			break
		}
	}
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		left := fs.Args()
		if len(left) == 0 {
			return append(pos, tail...), nil
		}
		pos = append(pos, left[0])
		args = left[1:]
	}
}

// exitCode maps an error to the documented exit codes.
func exitCode(err error) int {
	var ue *usageError
	var nf *notFound
	switch {
	case errors.As(err, &ue):
		return ExitUsage
	case errors.As(err, &nf):
		return ExitNotFound
	case errors.Is(err, errUnsupported):
		return ExitUnsupported
	}
	switch status.CodeOf(err) {
	case status.ConnectionFailed, status.ConnectionError:
		return ExitUnreachable
	case status.ObjectNotExists, status.MetaTreeNameNotExists:
		return ExitNotFound
	}
	return ExitFailed
}

func usage(w io.Writer) {
	fmt.Fprint(w, `vineyardctl: the command-line client of vineyardd.

Usage: vineyardctl [connection flags] COMMAND [flags] [args]

Commands:
`)
	for _, c := range commands {
		fmt.Fprintf(w, "  %-8s %-16s %s\n", c.name, c.args, c.summary)
	}
	fmt.Fprint(w, `
Connection flags (before or after the command):
  --socket PATH          UNIX socket of the daemon (default $VINEYARD_IPC_SOCKET)
  --endpoint HOST:PORT   the daemon's TCP listener instead (default $VINEYARD_RPC_ENDPOINT
                         when no socket is known)
  --rpc-auth-file FILE   secret for the TCP listener (default $VINEYARD_RPC_SECRET)
  --timeout DURATION     bound on connecting and on each request (default 30s)
  -o text|json           output for a human (default) or one JSON document (get: -o is the file)

Exit codes: 0 success, 1 the operation failed, 2 usage, 3 the daemon could not be
reached, 4 no such object or name, 5 the object cannot be written in the format asked
(or the file is not one put understands).

'vineyardctl help COMMAND' or 'vineyardctl COMMAND -h' shows a command's flags.
`)
}

func commandUsage(w io.Writer, c *command, fs *flag.FlagSet) {
	fmt.Fprintf(w, "Usage: vineyardctl %s [flags] %s\n\n%s\n\nFlags:\n", c.name, c.args, c.summary)
	fs.SetOutput(w)
	fs.PrintDefaults()
	fs.SetOutput(io.Discard)
}
