package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/v6d-io/v6d-go/internal/meta"
	"github.com/v6d-io/v6d-go/internal/server"
	"github.com/v6d-io/v6d-go/internal/shm"
)

// options are the daemon's settings, filled in by parseArgs.
type options struct {
	socket          string // "" for server.DefaultSocket()
	socketMode      os.FileMode
	size            uint64
	reserve         bool
	prefaultAhead   int64 // 0: the default; negative: off
	schedBatch      server.SchedMode
	dirEntries      uint64 // 0: from the size
	allowOvercommit bool
	meta            string
	instanceID      uint64
	instanceIDSet   bool
	etcdEndpoints   []string
	etcdPrefix      string
	etcdTimeout     time.Duration
	etcdLeaseTTL    time.Duration
	logLevel        slog.Level

	maxConnections   int
	maxInflightBytes uint64
	maxReplyBytes    uint64
	frameTimeout     time.Duration
	checkInvariants  time.Duration

	rpc         bool // the TCP listener, on rpcHost:rpcPort
	rpcHost     string
	rpcPort     int
	rpcSecret   []byte
	rpcInsecure bool

	peer peerOptions // the gRPC peer service (peerflags.go)
}

// flagDef is one row of the flag table. A flag is matched after dropping its
// leading dashes and turning '_' into '-', so upstream's --reserve_memory is
// --reserve-memory. A boolean flag (arg == "") also takes =true/=false and a
// "no" prefix (--norpc).
type flagDef struct {
	name  string                           // canonical spelling, with dashes
	arg   string                           // placeholder of the value; "" for a boolean flag
	def   func() string                    // the default, as --help shows it
	usage string                           // one line or more of help
	set   func(o *options, v string) error // stores the value ("true"/"false" for booleans)
}

func constant(s string) func() string { return func() string { return s } }

// flags is the table of every flag; a new flag is one row.
var flags = []flagDef{
	{"socket", "PATH", server.DefaultSocket,
		"UNIX socket the clients connect to (they find it through VINEYARD_IPC_SOCKET);\n" +
			"default /var/run/vineyard.sock for root, else $XDG_RUNTIME_DIR/vineyard.sock, else\n" +
			"/tmp/vineyard-$UID/vineyard.sock (that directory must be yours and mode 0700)",
		func(o *options, v string) error {
			if v == "" {
				return errors.New("--socket must not be empty")
			}
			o.socket = v
			return nil
		}},
	{"socket-mode", "MODE", constant("0600"),
		"permission bits of the socket file, octal (0660 lets the group connect)",
		func(o *options, v string) error {
			m, err := strconv.ParseUint(v, 8, 32)
			if err != nil || m&^0o777 != 0 {
				return fmt.Errorf("--socket-mode %q is not an octal permission such as 0600", v)
			}
			o.socketMode = os.FileMode(m)
			return nil
		}},
	{"size", "SIZE", func() string {
		return shm.FormatSize(shm.DefaultSize()) + " (half of the memory, within the cgroup limit)"
	},
		"size of the shared-memory arena: bytes, or 512Mi, 4Gi (powers of 1024), 2G (powers of\n" +
			"1000); over it a put fails with NotEnoughMemory. A size over the machine's memory or\n" +
			"the cgroup limit is refused unless --allow-overcommit",
		func(o *options, v string) error {
			n, err := shm.ParseSize(v)
			if err != nil {
				return fmt.Errorf("--size: %w", err)
			}
			if n == 0 {
				return errors.New("--size must be positive")
			}
			o.size = n
			return nil
		}},
	{"reserve-memory", "", constant("false"),
		"pre-fault the whole arena at start, so first writes do not pay for page faults;\n" +
			"refused at start when that much memory is not available now",
		boolSetter(func(o *options) *bool { return &o.reserve })},
	{"prefault-ahead", "SIZE", constant(shm.FormatSize(server.DefaultPrefaultAhead)),
		"bytes of never-used arena memory kept pre-faulted in the background, so that puts\n" +
			"into new memory run near memcpy speed (at most half a CPU, off the request path); 0: off",
		func(o *options, v string) error {
			n, err := shm.ParseSize(v)
			if err != nil {
				return fmt.Errorf("--prefault-ahead: %w", err)
			}
			o.prefaultAhead = int64(min(n, 1<<62))
			if n == 0 {
				o.prefaultAhead = -1
			}
			return nil
		}},
	{"sched-batch", "MODE", constant("auto"),
		"when the daemon's threads run under SCHED_BATCH, whose wake-ups do not preempt a busy\n" +
			"process: auto while at least as many clients stream puts as there are CPUs (then\n" +
			"10-25% more puts with 2-4 clients on 2 CPUs), on always, off never (SCHED_BATCH\n" +
			"costs a lone client streaming puts: up to 4x from C on the VMs we measure on)",
		func(o *options, v string) error {
			switch v {
			case "auto":
				o.schedBatch = server.SchedAuto
			case "on", "true":
				o.schedBatch = server.SchedOn
			case "off", "false":
				o.schedBatch = server.SchedOff
			default:
				return fmt.Errorf("--sched-batch %q: want auto, on or off", v)
			}
			return nil
		}},
	{"directory-entries", "N", constant("one per 4Ki of --size, 65536 to 1048576"),
		"objects and blobs that gets find in shared memory without asking the daemon (32\n" +
			"bytes of resident memory each); a get of any object past that takes a round trip",
		func(o *options, v string) error {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil || n == 0 || n > server.MaxDirectoryEntries {
				return fmt.Errorf("--directory-entries %q is not an integer from 1 to %d", v, server.MaxDirectoryEntries)
			}
			o.dirEntries = n
			return nil
		}},
	{"allow-overcommit", "", constant("false"),
		"accept a --size over the machine's memory or the cgroup limit (writers may then be\n" +
			"killed by the kernel's OOM killer instead of getting NotEnoughMemory)",
		boolSetter(func(o *options) *bool { return &o.allowOvercommit })},
	{"meta", "BACKEND", constant("local"),
		"where the metadata of persisted objects and the names live: local (in this daemon;\n" +
			"needs nothing else) or etcd (shared by every daemon with the same --etcd-prefix;\n" +
			"see docs/cluster.md)",
		func(o *options, v string) error {
			if v != "local" && v != "etcd" {
				return fmt.Errorf("--meta %q: want local or etcd", v)
			}
			o.meta = v
			return nil
		}},
	{"etcd-endpoint", "URL[,URL...]", constant(server.DefaultEtcdEndpoint),
		"etcd's client URLs, comma-separated (with --meta etcd)",
		func(o *options, v string) error {
			var eps []string
			for ep := range strings.SplitSeq(v, ",") {
				if ep = strings.TrimSpace(ep); ep != "" {
					eps = append(eps, ep)
				}
			}
			if len(eps) == 0 {
				return fmt.Errorf("--etcd-endpoint %q names no endpoint", v)
			}
			o.etcdEndpoints = eps
			return nil
		}},
	{"etcd-prefix", "PREFIX", constant(meta.DefaultEtcdPrefix),
		"key prefix in etcd; daemons with the same prefix form one cluster (with --meta etcd)",
		func(o *options, v string) error {
			if strings.Trim(v, "/") == "" {
				return fmt.Errorf("--etcd-prefix %q must not be empty", v)
			}
			o.etcdPrefix = v
			return nil
		}},
	{"etcd-timeout", "DURATION", constant(meta.DefaultEtcdTimeout.String()),
		"bound on connecting to etcd at start (the daemon fails after it, naming the\n" +
			"endpoint) and on every later call to etcd",
		durationSetter("--etcd-timeout", func(o *options) *time.Duration { return &o.etcdTimeout })},
	{"etcd-lease-ttl", "DURATION", constant(meta.DefaultLeaseTTL.String()),
		"this instance's etcd lease: how long after the daemon dies (or loses etcd) its\n" +
			"instance, persisted objects and names disappear from the cluster (whole seconds)",
		durationSetter("--etcd-lease-ttl", func(o *options) *time.Duration { return &o.etcdLeaseTTL })},
	{"rpc", "", constant("true"),
		"serve clients over TCP too (--rpc-host, --rpc-socket-port): the same protocol, blob\n" +
			"bytes copied over the connection instead of shared; --norpc turns it off",
		boolSetter(func(o *options) *bool { return &o.rpc })},
	{"rpc-socket-port", "PORT", constant(strconv.Itoa(server.DefaultRPCPort)),
		"TCP port of the RPC listener (0: any free port, logged at start)",
		func(o *options, v string) error {
			n, err := strconv.ParseUint(v, 10, 16)
			if err != nil {
				return fmt.Errorf("--rpc-socket-port %q is not a port number (0-65535)", v)
			}
			o.rpcPort = int(n)
			return nil
		}},
	{"rpc-host", "HOST", constant("127.0.0.1"),
		"address the RPC listener binds: loopback by default; any other (0.0.0.0 for every\n" +
			"interface) needs --rpc-auth-file or --rpc-insecure",
		func(o *options, v string) error {
			o.rpcHost = v
			return nil
		}},
	{"rpc-auth-file", "FILE", constant("none"),
		"file holding the shared secret TCP clients must present (register_request's password;\n" +
			"VINEYARD_RPC_SECRET for this package's clients); surrounding whitespace is ignored",
		func(o *options, v string) error {
			b, err := os.ReadFile(v)
			if err != nil {
				return fmt.Errorf("--rpc-auth-file: %w", err)
			}
			secret := strings.TrimSpace(string(b))
			if secret == "" {
				return fmt.Errorf("--rpc-auth-file %s is empty", v)
			}
			o.rpcSecret = []byte(secret)
			return nil
		}},
	{"rpc-insecure", "", constant("false"),
		"let the RPC listener bind off loopback without a secret: anyone who reaches the port\n" +
			"can read, write and delete every object",
		boolSetter(func(o *options) *bool { return &o.rpcInsecure })},
	{"instance-id", "N", constant("0"),
		"instance id of this daemon, reported to clients (with --meta etcd, etcd allocates it)",
		func(o *options, v string) error {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return fmt.Errorf("--instance-id %q is not a non-negative integer", v)
			}
			o.instanceID, o.instanceIDSet = n, true
			return nil
		}},
	{"max-connections", "N", constant(strconv.Itoa(server.DefaultMaxConnections)),
		"most client connections open at once; one more gets a ConnectionError and is closed",
		func(o *options, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return fmt.Errorf("--max-connections %q is not a positive integer", v)
			}
			o.maxConnections = n
			return nil
		}},
	{"max-inflight-bytes", "SIZE", constant(shm.FormatSize(server.DefaultMaxInflightBytes)),
		"most bytes of request frames being received by all connections together; a frame\n" +
			"that would go over it is drained and answered NotEnoughMemory",
		sizeSetter("--max-inflight-bytes", func(o *options) *uint64 { return &o.maxInflightBytes })},
	{"max-reply-bytes", "SIZE", constant(shm.FormatSize(server.DefaultMaxReply)),
		"largest reply the daemon builds (at most 1Gi, the most clients read); a request\n" +
			"whose reply would be larger gets an error",
		sizeSetter("--max-reply-bytes", func(o *options) *uint64 { return &o.maxReplyBytes })},
	{"frame-timeout", "DURATION", constant(server.DefaultFrameTimeout.String()),
		"time a request frame may take to arrive once begun, and one reply write to drain\n" +
			"(e.g. 30s, 2m); past it the connection is closed",
		func(o *options, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return fmt.Errorf("--frame-timeout %q is not a positive duration such as 30s", v)
			}
			o.frameTimeout = d
			return nil
		}},
	{"check-invariants", "DURATION", constant("0 (off)"),
		"for tests and soaks: check the store's bookkeeping every DURATION (e.g. 1s) and stop\n" +
			"the daemon with exit status 3 and the finding when it is broken",
		func(o *options, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return fmt.Errorf("--check-invariants %q is not a duration such as 1s", v)
			}
			o.checkInvariants = d
			return nil
		}},
	{"log-level", "LEVEL", constant("info"), "least severe log level written to stderr: debug, info, warn, error",
		func(o *options, v string) error {
			if err := o.logLevel.UnmarshalText([]byte(v)); err != nil {
				return fmt.Errorf("--log-level %q: want debug, info, warn or error", v)
			}
			return nil
		}},
	{"version", "", constant("false"), "print the version and exit",
		func(_ *options, v string) error {
			if v == "true" {
				return errVersion
			}
			return nil
		}},
	{"help", "", constant("false"), "print this help and exit (also -h)",
		func(_ *options, v string) error {
			if v == "true" {
				return errHelp
			}
			return nil
		}},
}

var (
	errHelp    = errors.New("help requested")
	errVersion = errors.New("version requested")
)

func sizeSetter(name string, field func(*options) *uint64) func(*options, string) error {
	return func(o *options, v string) error {
		n, err := shm.ParseSize(v)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if n == 0 || n > 1<<62 {
			return fmt.Errorf("%s %q must be positive", name, v)
		}
		*field(o) = n
		return nil
	}
}

func durationSetter(name string, field func(*options) *time.Duration) func(*options, string) error {
	return func(o *options, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("%s %q is not a positive duration such as 5s", name, v)
		}
		*field(o) = d
		return nil
	}
}

func boolSetter(field func(*options) *bool) func(*options, string) error {
	return func(o *options, v string) error {
		*field(o) = v == "true"
		return nil
	}
}

// lookup finds the flag of a normalised name, and for "no"+name of a boolean
// flag reports negated.
func lookup(name string) (f *flagDef, negated bool) {
	if name == "h" {
		name = "help"
	}
	for i := range flags {
		if flags[i].name == name {
			return &flags[i], false
		}
	}
	if rest, ok := strings.CutPrefix(name, "no"); ok {
		rest = strings.TrimPrefix(rest, "-")
		for i := range flags {
			if flags[i].name == rest && flags[i].arg == "" {
				return &flags[i], true
			}
		}
	}
	return nil, false
}

// parseArgs parses the command line: -flag or --flag, with the value after
// '=' or as the next argument; booleans take no value or =true/=false.
func parseArgs(args []string) (options, error) {
	o := options{socketMode: 0o600, meta: "local", logLevel: slog.LevelInfo,
		rpc: true, rpcHost: "127.0.0.1", rpcPort: server.DefaultRPCPort, schedBatch: server.SchedAuto}
	sizeSet := false
	for i := 0; i < len(args); i++ {
		arg := args[i]
		if !strings.HasPrefix(arg, "-") || arg == "-" || arg == "--" {
			return o, fmt.Errorf("unexpected argument %q (vineyardd takes only flags)", arg)
		}
		spelled, value, hasValue := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		f, negated := lookup(strings.ReplaceAll(spelled, "_", "-"))
		if f == nil {
			return o, fmt.Errorf("unknown flag --%s", spelled)
		}
		switch {
		case f.arg == "": // boolean
			v := "true"
			if hasValue {
				b, err := strconv.ParseBool(value)
				if err != nil {
					return o, fmt.Errorf("--%s=%s: want true or false", spelled, value)
				}
				v = strconv.FormatBool(b)
			}
			if negated {
				if hasValue {
					return o, fmt.Errorf("--%s takes no value", spelled)
				}
				v = "false"
			}
			value = v
		case !hasValue:
			if i+1 >= len(args) {
				return o, fmt.Errorf("--%s needs a value: --%s %s", spelled, f.name, f.arg)
			}
			i++
			value = args[i]
		}
		if err := f.set(&o, value); err != nil {
			return o, err
		}
		if f.name == "size" {
			sizeSet = true
		}
	}
	if !sizeSet {
		o.size = shm.DefaultSize()
	}
	if o.meta == "etcd" && o.instanceIDSet {
		return o, errors.New("--instance-id cannot be given with --meta etcd: etcd allocates a cluster-unique id")
	}
	if o.meta != "etcd" && (o.etcdEndpoints != nil || o.etcdPrefix != "" || o.etcdTimeout != 0 || o.etcdLeaseTTL != 0) {
		return o, errors.New("the --etcd-* flags need --meta etcd")
	}
	return o, nil
}

// usage writes --help: what the program is, every flag with its default, an
// example.
func usage(w io.Writer) {
	fmt.Fprintf(w, `vineyardd %s: the Vineyard daemon (Go re-implementation of v6d).

Keeps immutable objects (NumPy arrays, DataFrames, Arrow tables, raw blobs) in one
shared-memory arena and serves processes on this machine over a UNIX socket: a client
(libv6d.so from C, the Python package vineyard) puts an object once and any process gets
it back as a zero-copy, read-only view of the same memory. Stops cleanly on SIGINT or
SIGTERM; objects live as long as the daemon.

Usage: vineyardd [flags]

Flags (--flag=value or --flag value; one dash works too, and upstream Vineyard's
spellings with '_', such as --reserve_memory, are the same flags):
`, version)
	for _, f := range flags {
		head := "--" + f.name
		if f.arg != "" {
			head += " " + f.arg
		}
		fmt.Fprintf(w, "  %s\n", head)
		for line := range strings.SplitSeq(f.usage, "\n") {
			fmt.Fprintf(w, "        %s\n", line)
		}
		fmt.Fprintf(w, "        (default: %s)\n", f.def())
	}
	fmt.Fprint(w, `
Example:
  vineyardd --socket /tmp/v6d.sock --size 4Gi &
  VINEYARD_IPC_SOCKET=/tmp/v6d.sock python3 -c \
    'import numpy as np, vineyard; c = vineyard.connect(); print(c.get(c.put(np.arange(5))))'
`)
}
