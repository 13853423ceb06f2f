package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/v6d-io/v6d-go/internal/memsize"
	"github.com/v6d-io/v6d-go/internal/meta"
	"github.com/v6d-io/v6d-go/internal/server"
	"github.com/v6d-io/v6d-go/internal/streams"
)

// settings are what the command line sets: the server's config, which
// the flag table writes directly (one declaration of every setting, with
// its defaults in server.Config), and the few settings of the process
// itself.
type settings struct {
	server.Config
	logLevel        slog.Level
	checkInvariants time.Duration // 0: off
	readyFD         int           // -1: none (ready.go)
	noRPC           bool          // --norpc: RPCEndpoint is cleared once every flag is read
	peerGiven       bool          // --peer-port was given (peerflags.go)

	// Set by upstream's spellings (upstream.go) and the log and metrics
	// flags (logflags.go).
	metaGiven   bool     // --meta was given: no etcd flag turns etcd on by itself
	etcdGiven   bool     // an --etcd-* flag was given
	metaTimeout int64    // --meta_timeout, seconds; 0: not given
	warnings    []string // one per flag accepted but not supported here, logged once at start
	logFormat   string   // --log-format: "text" or "json"
	logDir      string   // -log_dir: also write the log to a file there
	logToStderr bool     // --logtostderr: never to a file
	metrics     bool     // --metrics / --prometheus
	metricsPort int      // --metrics-port; -1: not given
	metricsHost string   // --metrics-host
	coredump    bool     // --coredump: crash with a core dump
}

// defaultSettings are the settings of a daemon started with no flags.
func defaultSettings() settings {
	return settings{Config: server.Defaults(), logLevel: slog.LevelInfo, readyFD: -1, logFormat: "text",
		metricsPort: -1, metricsHost: server.DefaultMetricsHost}
}

// flagDef is one row of the flag table. A flag is matched after dropping its
// leading dashes and turning '_' into '-', so upstream's --reserve_memory is
// --reserve-memory. A boolean flag (arg == "") also takes =true/=false and a
// "no" prefix (--norpc).
type flagDef struct {
	name  string                            // canonical spelling, with dashes
	arg   string                            // placeholder of the value; "" for a boolean flag
	def   func(d *settings) string          // the default, as --help shows it, from defaultSettings
	usage string                            // one line or more of help
	set   func(o *settings, v string) error // stores the value ("true"/"false" for booleans)
}

func constant(s string) func(*settings) string { return func(*settings) string { return s } }

// flags is the table of every flag; a new flag is one row.
var flags = []flagDef{
	{"socket", "PATH", func(d *settings) string { return d.Socket },
		"UNIX socket the clients connect to (they find it through VINEYARD_IPC_SOCKET);\n" +
			"default /var/run/vineyard.sock for root, else $XDG_RUNTIME_DIR/vineyard.sock, else\n" +
			"/tmp/vineyard-$UID/vineyard.sock (that directory must be yours and mode 0700)",
		func(o *settings, v string) error {
			if v == "" {
				return errors.New("--socket must not be empty")
			}
			o.Socket = v
			return nil
		}},
	{"socket-mode", "MODE", func(d *settings) string { return fmt.Sprintf("%04o", uint32(d.SocketMode)) },
		"permission bits of the socket file, octal (0660 lets the group connect)",
		func(o *settings, v string) error {
			m, err := strconv.ParseUint(v, 8, 32)
			if err != nil || m&^0o777 != 0 {
				return fmt.Errorf("--socket-mode %q is not an octal permission such as 0600", v)
			}
			o.SocketMode = os.FileMode(m)
			return nil
		}},
	{"size", "SIZE", func(d *settings) string {
		return memsize.FormatSize(d.Size) + " (half of the memory, within the cgroup limit)"
	},
		"size of the shared-memory arena: bytes, or 512Mi, 4Gi (powers of 1024), 2G (powers of\n" +
			"1000); over it a put fails with NotEnoughMemory. A size over the machine's memory or\n" +
			"the cgroup limit is refused unless --allow-overcommit",
		func(o *settings, v string) error {
			if v == "" {
				return nil // upstream's "no limit" (python -m vineyard passes --size ''): the default here
			}
			n, err := memsize.ParseSize(v)
			if err != nil {
				return fmt.Errorf("--size: %w", err)
			}
			if n == 0 {
				return errors.New("--size must be positive")
			}
			o.Size = n
			return nil
		}},
	{"reserve-memory", "", constant("false"),
		"pre-fault the whole arena at start, so first writes do not pay for page faults;\n" +
			"refused at start when that much memory is not available now",
		boolSetter(func(o *settings) *bool { return &o.ReserveMemory })},
	{"prefault-ahead", "SIZE", func(d *settings) string { return memsize.FormatSize(uint64(d.PrefaultAhead)) },
		"bytes of never-used arena memory kept pre-faulted in the background, so that puts\n" +
			"into new memory run near memcpy speed (at most half a CPU, off the request path); 0: off",
		func(o *settings, v string) error {
			n, err := memsize.ParseSize(v)
			if err != nil {
				return fmt.Errorf("--prefault-ahead: %w", err)
			}
			o.PrefaultAhead = int64(min(n, 1<<62))
			if n == 0 {
				o.PrefaultAhead = -1 // server.Config's "off"
			}
			return nil
		}},
	{"sched-batch", "MODE", func(d *settings) string { return d.SchedBatch.String() },
		"when the daemon's threads run under SCHED_BATCH, whose wake-ups do not preempt a busy\n" +
			"process: auto while at least as many clients stream puts as there are CPUs (then\n" +
			"10-25% more puts with 2-4 clients on 2 CPUs), on always, off never (SCHED_BATCH\n" +
			"costs a lone client streaming puts: up to 4x from C on the VMs we measure on)",
		func(o *settings, v string) error {
			switch v {
			case "auto":
				o.SchedBatch = server.SchedAuto
			case "on", "true":
				o.SchedBatch = server.SchedOn
			case "off", "false":
				o.SchedBatch = server.SchedOff
			default:
				return fmt.Errorf("--sched-batch %q: want auto, on or off", v)
			}
			return nil
		}},
	{"directory-entries", "N", constant("one per 4Ki of --size, 65536 to 1048576"),
		"objects and blobs that gets find in shared memory without asking the daemon (32\n" +
			"bytes of resident memory each); a get of any object past that takes a round trip",
		func(o *settings, v string) error {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil || n == 0 || n > server.MaxDirectoryEntries {
				return fmt.Errorf("--directory-entries %q is not an integer from 1 to %d", v, server.MaxDirectoryEntries)
			}
			o.DirectoryEntries = n
			return nil
		}},
	{"spill-path", "DIR", constant("off"),
		"spill sealed objects no client holds to files in DIR when the arena fills, and load\n" +
			"them back on get (docs/design.md, \"Spilling\"); DIR is created 0700, or must be yours\n" +
			"and writable by nobody else; spill files left by a daemon that died are removed",
		func(o *settings, v string) error {
			if v == "" {
				return errors.New("--spill-path must not be empty")
			}
			o.SpillPath = v
			return nil
		}},
	{"spill-lower-rate", "RATE", func(d *settings) string { return strconv.FormatFloat(d.SpillLowerRate, 'g', -1, 64) },
		"spilling stops once the arena's usage is at most RATE x --size",
		rateSetter("spill-lower-rate", func(o *settings) *float64 { return &o.SpillLowerRate })},
	{"spill-upper-rate", "RATE", func(d *settings) string { return strconv.FormatFloat(d.SpillUpperRate, 'g', -1, 64) },
		"spilling starts when the arena's usage reaches RATE x --size",
		rateSetter("spill-upper-rate", func(o *settings) *float64 { return &o.SpillUpperRate })},
	{"spill-wait", "DURATION", func(d *settings) string { return d.SpillWait.String() },
		"how long a put (or a load) that finds no room waits while objects spill, before it\n" +
			"fails with NotEnoughMemory; 0: fail at once",
		func(o *settings, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return fmt.Errorf("--spill-wait %q is not a duration such as 30s", v)
			}
			o.SpillWait = d
			if d == 0 {
				o.SpillWait = -1 // server.Config's "no wait"
			}
			return nil
		}},
	{"allow-overcommit", "", constant("false"),
		"accept a --size over the machine's memory or the cgroup limit (writers may then be\n" +
			"killed by the kernel's OOM killer instead of getting NotEnoughMemory)",
		boolSetter(func(o *settings) *bool { return &o.AllowOvercommit })},
	{"meta", "BACKEND", func(d *settings) string { return d.Meta },
		"where the metadata of persisted objects and the names live: local (in this daemon;\n" +
			"needs nothing else) or etcd (shared by every daemon with the same --etcd-prefix;\n" +
			"see docs/cluster.md). Without --meta, any --etcd-* flag means etcd (upstream's\n" +
			"default backend); with none, local",
		func(o *settings, v string) error {
			if v == "redis" {
				return errors.New("--meta redis: upstream's redis backend is not supported here; want local or etcd")
			}
			if v != "local" && v != "etcd" {
				return fmt.Errorf("--meta %q: want local or etcd", v)
			}
			o.Meta = v
			o.metaGiven = true
			return nil
		}},
	{"etcd-endpoint", "URL[,URL...]", constant(server.DefaultEtcdEndpoint),
		"etcd's client URLs, comma-separated (implies --meta etcd)",
		func(o *settings, v string) error {
			var eps []string
			for ep := range strings.SplitSeq(v, ",") {
				if ep = strings.TrimSpace(ep); ep != "" {
					eps = append(eps, ep)
				}
			}
			if len(eps) == 0 {
				return fmt.Errorf("--etcd-endpoint %q names no endpoint", v)
			}
			o.EtcdEndpoints = eps
			return nil
		}},
	{"etcd-prefix", "PREFIX", constant(meta.DefaultEtcdPrefix),
		"key prefix in etcd; daemons with the same prefix form one cluster (with --meta etcd)",
		func(o *settings, v string) error {
			if strings.Trim(v, "/") == "" {
				return fmt.Errorf("--etcd-prefix %q must not be empty", v)
			}
			o.EtcdPrefix = v
			return nil
		}},
	{"etcd-cacert", "FILE", constant("none (the system's roots with https:// endpoints)"),
		"PEM CA that verifies etcd's certificate (TLS; endpoints are https:// URLs)",
		func(o *settings, v string) error { o.EtcdCACert = v; return nil }},
	{"etcd-cert", "FILE", constant("none"),
		"PEM client certificate presented to etcd (its --client-cert-auth); needs --etcd-key",
		func(o *settings, v string) error { o.EtcdCert = v; return nil }},
	{"etcd-key", "FILE", constant("none"), "PEM private key of --etcd-cert",
		func(o *settings, v string) error { o.EtcdKey = v; return nil }},
	{"etcd-user", "USER", constant("none"),
		"etcd user to authenticate as (etcd's auth enabled); the password comes from\n" +
			"--etcd-password-file",
		func(o *settings, v string) error { o.EtcdUser = v; return nil }},
	{"etcd-password-file", "FILE", constant("none"),
		"file holding the password of --etcd-user (a trailing newline is ignored)",
		func(o *settings, v string) error {
			b, err := os.ReadFile(v)
			if err != nil {
				return fmt.Errorf("--etcd-password-file: %w", err)
			}
			if o.EtcdPassword = strings.TrimRight(string(b), "\r\n"); o.EtcdPassword == "" {
				return fmt.Errorf("--etcd-password-file %s is empty", v)
			}
			return nil
		}},
	{"etcd-timeout", "DURATION", constant(meta.DefaultEtcdTimeout.String()),
		"bound on connecting to etcd at start (the daemon fails after it, naming the\n" +
			"endpoint) and on every later call to etcd",
		durationSetter("--etcd-timeout", func(o *settings) *time.Duration { return &o.EtcdTimeout })},
	{"etcd-lease-ttl", "DURATION", constant(meta.DefaultLeaseTTL.String()),
		"this instance's etcd lease: how long after the daemon dies (or loses etcd) its\n" +
			"instance, persisted objects and names disappear from the cluster (whole seconds)",
		durationSetter("--etcd-lease-ttl", func(o *settings) *time.Duration { return &o.EtcdLeaseTTL })},
	{"rpc", "", func(d *settings) string { return strconv.FormatBool(d.RPCEndpoint != "") },
		"serve clients over TCP too (--rpc-host, --rpc-socket-port): the same protocol, blob\n" +
			"bytes copied over the connection instead of shared; --norpc turns it off",
		func(o *settings, v string) error {
			o.noRPC = v != "true"
			return nil
		}},
	{"rpc-socket-port", "PORT", func(d *settings) string { return port(d.RPCEndpoint) },
		"TCP port of the RPC listener (0: any free port, logged at start)",
		func(o *settings, v string) error {
			n, err := strconv.ParseUint(v, 10, 16)
			if err != nil {
				return fmt.Errorf("--rpc-socket-port %q is not a port number (0-65535)", v)
			}
			o.RPCEndpoint = net.JoinHostPort(host(o.RPCEndpoint), strconv.FormatUint(n, 10))
			return nil
		}},
	{"rpc-host", "HOST", func(d *settings) string { return host(d.RPCEndpoint) },
		"address the RPC listener binds: loopback by default; any other (0.0.0.0 for every\n" +
			"interface) needs --rpc-auth-file or --rpc-insecure",
		func(o *settings, v string) error {
			o.RPCEndpoint = net.JoinHostPort(v, port(o.RPCEndpoint))
			return nil
		}},
	{"rpc-auth-file", "FILE", constant("none"),
		"file holding the shared secret TCP clients must present (register_request's password;\n" +
			"VINEYARD_RPC_SECRET for this package's clients); surrounding whitespace is ignored.\n" +
			"Without it only local clients of the daemon's user or root are served over TCP",
		func(o *settings, v string) error {
			b, err := os.ReadFile(v)
			if err != nil {
				return fmt.Errorf("--rpc-auth-file: %w", err)
			}
			secret := strings.TrimSpace(string(b))
			if secret == "" {
				return fmt.Errorf("--rpc-auth-file %s is empty", v)
			}
			o.RPCSecret = []byte(secret)
			return nil
		}},
	{"rpc-insecure", "", constant("false"),
		"let the RPC listener bind off loopback without a secret: anyone who reaches the port\n" +
			"can read, write and delete every object",
		boolSetter(func(o *settings) *bool { return &o.RPCInsecure })},
	{"instance-id", "N", func(d *settings) string { return strconv.FormatUint(d.InstanceID, 10) },
		"instance id of this daemon, reported to clients (with --meta etcd, etcd allocates it)",
		func(o *settings, v string) error {
			n, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				return fmt.Errorf("--instance-id %q is not a non-negative integer", v)
			}
			o.InstanceID = n
			return nil
		}},
	{"rpc-max-connections", "N", func(d *settings) string { return strconv.Itoa(d.MaxRPCConnections) },
		"most TCP connections open at once, registered or not (the UNIX socket has\n" +
			"--max-connections of its own); one more gets a ConnectionError and is closed",
		func(o *settings, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return fmt.Errorf("--rpc-max-connections %q is not a positive integer", v)
			}
			o.MaxRPCConnections = n
			return nil
		}},
	{"register-timeout", "DURATION", func(d *settings) string { return d.RegisterTimeout.String() },
		"time a TCP client has from its connect to its register_request (e.g. 10s); past it\n" +
			"the connection is told so and closed",
		func(o *settings, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return fmt.Errorf("--register-timeout %q is not a positive duration such as 10s", v)
			}
			o.RegisterTimeout = d
			return nil
		}},
	{"max-connections", "N", func(d *settings) string { return strconv.Itoa(d.MaxConnections) },
		"most UNIX-socket client connections open at once; one more gets a ConnectionError and\n" +
			"is closed",
		func(o *settings, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return fmt.Errorf("--max-connections %q is not a positive integer", v)
			}
			o.MaxConnections = n
			return nil
		}},
	{"max-inflight-bytes", "SIZE", func(d *settings) string { return memsize.FormatSize(uint64(d.MaxInflightBytes)) },
		"most bytes of request frames being received by all connections together; a frame\n" +
			"that would go over it is drained and answered NotEnoughMemory",
		sizeSetter("--max-inflight-bytes", func(o *settings, n uint64) { o.MaxInflightBytes = int64(n) })},
	{"max-reply-bytes", "SIZE", func(d *settings) string { return memsize.FormatSize(uint64(d.MaxReplyBytes)) },
		"largest reply the daemon builds (at most 1Gi, the most clients read); a request\n" +
			"whose reply would be larger gets an error",
		sizeSetter("--max-reply-bytes", func(o *settings, n uint64) { o.MaxReplyBytes = int(n) })},
	{"frame-timeout", "DURATION", func(d *settings) string { return d.FrameTimeout.String() },
		"time a request frame may take to arrive once begun, and one reply write to drain\n" +
			"(e.g. 30s, 2m); past it the connection is closed",
		func(o *settings, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return fmt.Errorf("--frame-timeout %q is not a positive duration such as 30s", v)
			}
			o.FrameTimeout = d
			return nil
		}},
	{"stream-capacity", "N", func(d *settings) string { return strconv.Itoa(d.StreamCapacity) },
		"chunks a stream holds that its readers have not all read before its writer waits\n" +
			"(a stream's creator may choose its own, up to 65536)",
		func(o *settings, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 || n > streams.MaxCapacity {
				return fmt.Errorf("--stream-capacity %q is not an integer from 1 to %d", v, streams.MaxCapacity)
			}
			o.StreamCapacity = n
			return nil
		}},
	{"stream-push-timeout", "DURATION", func(d *settings) string { return d.StreamPushTimeout.String() },
		"longest a push to a full stream waits for its readers (e.g. 1m) before it fails with\n" +
			"NotEnoughMemory, unless the push says",
		func(o *settings, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return fmt.Errorf("--stream-push-timeout %q is not a positive duration such as 1m", v)
			}
			o.StreamPushTimeout = d
			return nil
		}},
	{"check-invariants", "DURATION", constant("0 (off)"),
		"for tests and soaks: check the store's bookkeeping every DURATION (e.g. 1s) and stop\n" +
			"the daemon with exit status 3 and the finding when it is broken",
		func(o *settings, v string) error {
			d, err := time.ParseDuration(v)
			if err != nil || d < 0 {
				return fmt.Errorf("--check-invariants %q is not a duration such as 1s", v)
			}
			o.checkInvariants = d
			return nil
		}},
	{"ready-fd", "N", constant("none"),
		"file descriptor, inherited open for writing, on which the daemon writes one line once\n" +
			"every listener accepts connections, then closes it: READY and a JSON object (socket,\n" +
			"rpc_endpoint, instance_id, pid); a daemon that fails to start writes nothing and exits.\n" +
			"With NOTIFY_SOCKET set it also sends READY=1 there (systemd's Type=notify)",
		func(o *settings, v string) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				return fmt.Errorf("--ready-fd %q is not a file descriptor number", v)
			}
			o.readyFD = n
			return nil
		}},
	{"log-level", "LEVEL", constant("info"), "least severe log level written to stderr: debug, info, warn, error",
		func(o *settings, v string) error {
			if err := o.logLevel.UnmarshalText([]byte(v)); err != nil {
				return fmt.Errorf("--log-level %q: want debug, info, warn or error", v)
			}
			return nil
		}},
	{"version", "", constant("false"), "print the version and exit",
		func(_ *settings, v string) error {
			if v == "true" {
				return errVersion
			}
			return nil
		}},
	{"help", "", constant("false"), "print this help and exit (also -h)",
		func(_ *settings, v string) error {
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

func sizeSetter(name string, set func(o *settings, n uint64)) func(*settings, string) error {
	return func(o *settings, v string) error {
		n, err := memsize.ParseSize(v)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if n == 0 || n > 1<<62 {
			return fmt.Errorf("%s %q must be positive", name, v)
		}
		set(o, n)
		return nil
	}
}

func durationSetter(name string, field func(*settings) *time.Duration) func(*settings, string) error {
	return func(o *settings, v string) error {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("%s %q is not a positive duration such as 5s", name, v)
		}
		*field(o) = d
		return nil
	}
}

func boolSetter(field func(*settings) *bool) func(*settings, string) error {
	return func(o *settings, v string) error {
		*field(o) = v == "true"
		return nil
	}
}

// host and port return the parts of a "host:port" endpoint.
func host(endpoint string) string {
	h, _, _ := net.SplitHostPort(endpoint)
	return h
}

func port(endpoint string) string {
	_, p, _ := net.SplitHostPort(endpoint)
	return p
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
func parseArgs(args []string) (settings, error) {
	o := defaultSettings()
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
		if strings.HasPrefix(f.name, "etcd-") {
			o.etcdGiven = true
		}
		switch {
		case f.arg == "": // boolean
			v := "true"
			if !hasValue && !negated && i+1 < len(args) {
				// gflags' operator command lines say --sync_crds true: a boolean's
				// value may follow it (nothing else may: there are no positional
				// arguments to mistake it for).
				if _, err := strconv.ParseBool(args[i+1]); err == nil {
					i++
					value, hasValue = args[i], true
				}
			}
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
	}
	if o.noRPC {
		o.RPCEndpoint = ""
	}
	if o.etcdGiven && !o.metaGiven {
		o.Meta = "etcd" // upstream's default backend, chosen by its flags
	}
	if err := o.finishUpstream(); err != nil {
		return o, err
	}
	o.PeerEndpoint = peerEndpoint(&o)
	// Said in the flags' words; Config.Validate checks the same.
	if o.Meta == "etcd" && o.InstanceID != 0 {
		return o, errors.New("--instance-id cannot be given with --meta etcd: etcd allocates a cluster-unique id")
	}
	if o.Meta != "etcd" && (o.EtcdEndpoints != nil || o.EtcdPrefix != "" || o.EtcdTimeout != 0 || o.EtcdLeaseTTL != 0) {
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
	d := defaultSettings()
	for _, f := range flags {
		head := "--" + f.name
		if f.arg != "" {
			head += " " + f.arg
		}
		fmt.Fprintf(w, "  %s\n", head)
		for line := range strings.SplitSeq(f.usage, "\n") {
			fmt.Fprintf(w, "        %s\n", line)
		}
		fmt.Fprintf(w, "        (default: %s)\n", f.def(&d))
	}
	fmt.Fprint(w, `
Example:
  vineyardd --socket /tmp/v6d.sock --size 4Gi &
  VINEYARD_IPC_SOCKET=/tmp/v6d.sock python3 -c \
    'import numpy as np, vineyard; c = vineyard.connect(); print(c.get(c.put(np.arange(5))))'
`)
}

// rateSetter stores a fraction from 0 to 1.
func rateSetter(name string, field func(*settings) *float64) func(*settings, string) error {
	return func(o *settings, v string) error {
		r, err := strconv.ParseFloat(v, 64)
		if err != nil || r < 0 || r > 1 {
			return fmt.Errorf("--%s %q is not a number from 0 to 1", name, v)
		}
		*field(o) = r
		return nil
	}
}
