package server

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/v6d-io/v6d-go/internal/memsize"
	"github.com/v6d-io/v6d-go/internal/meta"
	"github.com/v6d-io/v6d-go/internal/metrics"
	"github.com/v6d-io/v6d-go/internal/peer"
	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/store"
	"github.com/v6d-io/v6d-go/internal/streams"
)

// Config configures a daemon; it is the daemon's one declaration of its
// settings: cmd/vineyardd's flag table writes its fields directly.
//
// Defaults resolve in one place, Validate: the zero value of every field but
// Size stands for its default (or, where the comment says so, for "off"),
// and Validate fills the defaults in. Defaults is the daemon's starting
// point: Validate's defaults plus what a daemon started from the command
// line turns on that a zero Config leaves off (an arena of half the memory,
// the TCP listener, SCHED_BATCH on demand). Tests start from a zero Config
// or from Defaults.
type Config struct {
	// Socket is the UNIX socket path; DefaultSocket() when empty.
	Socket string
	// SocketMode is the permission of the socket file; 0600 when zero.
	SocketMode fs.FileMode
	// Size is the arena size in bytes (the memory limit of all blobs). It
	// has no default in Validate; Defaults sets memsize.DefaultSize().
	// Validate refuses a size over the memory this process may use
	// (memsize.CheckSize) unless AllowOvercommit.
	Size uint64
	// AllowOvercommit accepts a Size over the machine's memory or the cgroup
	// limit.
	AllowOvercommit bool
	// ReserveMemory pre-faults the whole arena at start; Validate refuses it
	// when that much memory is not free now.
	ReserveMemory bool
	// PrefaultAhead is how many bytes of never-used arena memory a
	// background goroutine keeps pre-faulted (store.Config.PrefaultAhead):
	// DefaultPrefaultAhead when zero, none when negative.
	PrefaultAhead int64
	// SchedBatch says when the daemon's threads run under SCHED_BATCH
	// (sched.go); SchedOff, the zero value, never; Defaults: SchedAuto.
	SchedBatch SchedMode
	// DirectoryEntries is how many objects and blobs gets can find without
	// a round trip (store.Config.DirectoryEntries); one per 4 KiB of Size
	// (at least 65,536, at most 1,048,576) when zero.
	DirectoryEntries uint64
	// Meta is the metadata backend: "local" (the default) or "etcd".
	Meta string
	// InstanceID is this daemon's instance id with the local backend; with
	// etcd, the backend allocates a cluster-unique one and InstanceID must be 0.
	InstanceID uint64
	// EtcdEndpoints are etcd's client URLs (Meta "etcd");
	// [DefaultEtcdEndpoint] when empty.
	EtcdEndpoints []string
	// EtcdPrefix is the key prefix in etcd; daemons with the same prefix form
	// one cluster. meta.DefaultEtcdPrefix when empty.
	EtcdPrefix string
	// EtcdTimeout bounds the connection to etcd at Start (Start fails after
	// it, naming the endpoints) and every later call; meta.DefaultEtcdTimeout
	// when zero. It also bounds the wait of get_data's sync_remote.
	EtcdTimeout time.Duration
	// EtcdCACert, EtcdCert and EtcdKey are PEM files of the etcd client's
	// TLS (meta.EtcdTLS): any of them set turns TLS on.
	EtcdCACert, EtcdCert, EtcdKey string
	// EtcdUser and EtcdPassword authenticate the client to etcd when
	// EtcdUser is set.
	EtcdUser, EtcdPassword string
	// EtcdLeaseTTL is the instance's lease: how long after the daemon dies
	// its instance and persisted objects disappear from the cluster;
	// meta.DefaultLeaseTTL when zero.
	EtcdLeaseTTL time.Duration
	// EtcdCmd, when set, is the etcd executable Start launches when no etcd
	// answers at the first of EtcdEndpoints and that endpoint is on this
	// machine (internal/etcdlaunch; upstream's --etcd_cmd). The server owns
	// the process: Close stops it.
	EtcdCmd string
	// EtcdDataDir is the data directory of the etcd EtcdCmd launches; a
	// temporary one, removed at Close, when empty.
	EtcdDataDir string
	// MetricsEndpoint is the "host:port" of the HTTP listener serving
	// /metrics (Prometheus), /healthz and /readyz (httpd.go); port 0 takes a
	// free port; "" (the zero value) starts none.
	MetricsEndpoint string
	// MaxFrame bounds request frames; protocol.DefaultMaxFrame when zero.
	MaxFrame int
	// MaxReplyBytes bounds a reply: a request whose reply would be larger
	// gets an error instead; DefaultMaxReply when zero, at most
	// protocol.MaxReplyFrame.
	MaxReplyBytes int
	// Deployment is reported in instance status; "local" when empty.
	Deployment string
	// Logger receives the daemon's logs; slog.Default() when nil.
	Logger *slog.Logger
	// Metrics is the registry the server and its store register their
	// metrics in (metrics.go); a new one when nil. Server.Metrics returns it.
	Metrics *metrics.Registry
	// MaxConnections bounds the UNIX socket's open client connections
	// (TCP clients have MaxRPCConnections of their own); when zero,
	// DefaultMaxConnections or less: within the kernel's mapping limit
	// (MappingBudget), since each UNIX connection maps a pin page. A client
	// beyond it gets an error frame and is disconnected.
	MaxConnections int
	// MaxRPCConnections bounds the TCP listener's open connections,
	// registered or not; DefaultMaxRPCConnections when zero.
	MaxRPCConnections int
	// RegisterTimeout is how long a TCP client may take from its connect to
	// its register_request; DefaultRegisterTimeout when zero.
	RegisterTimeout time.Duration
	// MaxPinPages bounds the connections given a pin page (gets from the
	// directory without a round trip), one mapping each; MappingBudget()
	// when zero. A connection beyond it gets objects by round trip, and
	// the daemon logs that once.
	MaxPinPages int
	// MaxInflightBytes bounds the bytes of request frames being received by
	// all connections together; DefaultMaxInflightBytes when zero. A frame
	// that would go over it is drained and answered with NotEnoughMemory.
	MaxInflightBytes int64
	// FrameTimeout is how long a request frame may take to arrive once its
	// first byte has (and how long one write of a reply may block);
	// DefaultFrameTimeout when zero. The connection is closed when it passes.
	FrameTimeout time.Duration
	// StreamCapacity is how many chunks a stream buffers before its writer
	// waits, unless its creator says (internal/streams);
	// streams.DefaultCapacity (16) when zero.
	StreamCapacity int
	// StreamPushTimeout bounds how long a push to a full stream waits for
	// its readers, unless the request says; DefaultStreamPushTimeout when
	// zero. The push then fails with NotEnoughMemory.
	StreamPushTimeout time.Duration
	// RPCEndpoint is the "host:port" the TCP listener binds (rpc.go); port 0
	// takes a free port; "" (the zero value) starts no TCP listener;
	// Defaults: DefaultRPCHost:DefaultRPCPort.
	RPCEndpoint string
	// RPCSecret, when not empty, is the shared secret every TCP client must
	// present at registration (register_request's password).
	RPCSecret []byte
	// RPCInsecure lets the TCP listener bind off loopback without RPCSecret.
	RPCInsecure bool
	// ParkAfter is how long an idle connection keeps its thread, blocked in
	// read, before it is parked in the daemon's epoll set; DefaultParkAfter
	// when zero.
	ParkAfter time.Duration
	// PeerEndpoint is the "host:port" the gRPC peer service binds
	// (migrate.go, internal/peer); port 0 takes a free port; "" starts none
	// (cmd/vineyardd starts one on DefaultPeerEndpoint with Meta "etcd").
	// Off loopback it needs PeerSecret or PeerTLS.CA.
	PeerEndpoint string
	// PeerSecret is the shared secret of the peer service, sent and required.
	PeerSecret string
	// PeerTLS are the TLS files of the peer service (server and client).
	PeerTLS peer.TLSFiles
	// SpillPath, when set, turns spilling on: sealed objects no client
	// holds move to files in this directory when the arena fills
	// (store.Config.SpillPath; docs/design.md, "Spilling").
	SpillPath string
	// SpillLowerRate and SpillUpperRate are the spill marks, fractions of
	// Size (store.DefaultSpillLowerRate, store.DefaultSpillUpperRate when 0).
	SpillLowerRate, SpillUpperRate float64
	// SpillWait bounds how long a put waits for spilling to make room
	// (store.DefaultSpillWait when 0; no wait when negative).
	SpillWait time.Duration
}

// Defaults returns the config of a daemon started with no flags: every
// default Validate fills in, plus an arena of memsize.DefaultSize(), the TCP
// listener on DefaultRPCHost:DefaultRPCPort and SchedAuto. The socket is
// DefaultSocket() and the logger slog.Default().
func Defaults() Config {
	c := Config{
		Size:        memsize.DefaultSize(),
		SchedBatch:  SchedAuto,
		RPCEndpoint: net.JoinHostPort(DefaultRPCHost, strconv.Itoa(DefaultRPCPort)),
	}
	c.fillDefaults()
	return c
}

// DefaultRPCHost is the address the daemon's TCP listener binds by default:
// loopback only.
const DefaultRPCHost = "127.0.0.1"

// DefaultMetricsHost and DefaultMetricsPort are where cmd/vineyardd's
// metrics listener (Config.MetricsEndpoint) binds unless told otherwise:
// loopback, and the port of upstream's --metrics when no --metrics-port is
// given.
const (
	DefaultMetricsHost = "127.0.0.1"
	DefaultMetricsPort = 9610
)

// DefaultPeerEndpoint is where a cluster daemon's peer service listens
// unless told otherwise: any free port on loopback (peers find it in the
// etcd instance record).
const DefaultPeerEndpoint = "127.0.0.1:0"

// DefaultEtcdEndpoint is etcd's endpoint when Config.EtcdEndpoints is empty.
const DefaultEtcdEndpoint = "http://127.0.0.1:2379"

// validateMeta checks the metadata backend's settings and fills in their
// defaults.
func (c *Config) validateMeta() error {
	switch c.Meta {
	case "local":
		if len(c.EtcdEndpoints) > 0 || c.EtcdPrefix != "" || c.EtcdTimeout != 0 || c.EtcdLeaseTTL != 0 ||
			c.EtcdCmd != "" || c.EtcdDataDir != "" ||
			c.EtcdCACert != "" || c.EtcdCert != "" || c.EtcdKey != "" || c.EtcdUser != "" || c.EtcdPassword != "" {
			return fmt.Errorf("%w: etcd settings given with the local meta backend", ErrBadConfig)
		}
		return nil
	case "etcd":
	default:
		return fmt.Errorf("%w: meta backend %q is not supported (want \"local\" or \"etcd\")", ErrBadConfig, c.Meta)
	}
	if c.InstanceID != 0 {
		return fmt.Errorf("%w: an instance id cannot be given with the etcd meta backend (etcd allocates it)", ErrBadConfig)
	}
	if c.EtcdTimeout < 0 || c.EtcdLeaseTTL < 0 {
		return fmt.Errorf("%w: etcd timeout and lease TTL must not be negative", ErrBadConfig)
	}
	if (c.EtcdCert == "") != (c.EtcdKey == "") {
		return fmt.Errorf("%w: an etcd client certificate needs both --etcd-cert and --etcd-key", ErrBadConfig)
	}
	if c.EtcdPassword != "" && c.EtcdUser == "" {
		return fmt.Errorf("%w: an etcd password without --etcd-user", ErrBadConfig)
	}
	if len(c.EtcdEndpoints) == 0 {
		c.EtcdEndpoints = []string{DefaultEtcdEndpoint}
	}
	if c.EtcdPrefix == "" {
		c.EtcdPrefix = meta.DefaultEtcdPrefix
	}
	if c.EtcdTimeout == 0 {
		c.EtcdTimeout = meta.DefaultEtcdTimeout
	}
	if c.EtcdLeaseTTL == 0 {
		c.EtcdLeaseTTL = meta.DefaultLeaseTTL
	}
	return nil
}

// storeConfig is the store's part of the config (its Backend is set by
// Start, which opens it).
func (c *Config) storeConfig() store.Config {
	logger := c.Logger
	return store.Config{
		Size:             c.Size,
		Reserve:          c.ReserveMemory,
		InstanceID:       c.InstanceID,
		MaxReplyBytes:    uint64(c.MaxReplyBytes),
		PrefaultAhead:    uint64(max(c.PrefaultAhead, 0)),
		DirectoryEntries: c.DirectoryEntries,
		MaxPinPages:      c.MaxPinPages,
		SpillPath:        c.SpillPath,
		SpillLowerRate:   c.SpillLowerRate,
		SpillUpperRate:   c.SpillUpperRate,
		SpillWait:        c.SpillWait,
		DirectoryFull: func(entries int) {
			// Called under the store's lock: the log's writer may block.
			go logger.Warn("the directory is full: gets of objects that find no room take a round trip; "+
				"start the daemon with a larger --directory-entries", "entries", entries)
		},
	}
}

// MaxDirectoryEntries is the most Config.DirectoryEntries may ask for.
const MaxDirectoryEntries = store.MaxDirectoryEntries

// DefaultPrefaultAhead is Config.PrefaultAhead's default: enough for puts
// of tens of MiB to find their memory resident, at a cost of 64 MiB of
// memory and ~0.1 s of one CPU, once.
const DefaultPrefaultAhead = 64 << 20

// DefaultMaxReply is the reply size limit unless configured otherwise.
const DefaultMaxReply = 256 << 20

// Defaults of the connection limits of Config.
const (
	DefaultMaxConnections    = 65536
	DefaultMaxRPCConnections = 1024
	DefaultRegisterTimeout   = 10 * time.Second
	DefaultMaxInflightBytes  = 256 << 20
	DefaultFrameTimeout      = 30 * time.Second
	DefaultParkAfter         = time.Second
	DefaultStreamPushTimeout = time.Minute
)

// maxMapCountFile holds the kernel's limit of mappings per process.
const maxMapCountFile = "/proc/sys/vm/max_map_count"

// MappingBudget returns how many pin pages (one mapping each) the daemon
// may map: the kernel's vm.max_map_count (65,530 by default; read from
// /proc, that default when unreadable) less a headroom of a sixteenth, at
// least 4,096, for the arena, the directory, the Go runtime, libraries and
// the mappings of large replies. Upstream's default of 65,536 connections
// is above the kernel's default limit.
func MappingBudget() int {
	limit := 65530
	if b, err := os.ReadFile(maxMapCountFile); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && n > 0 {
			limit = n
		}
	}
	return max(limit-max(limit/16, 4096), 64)
}

// ErrBadConfig is returned (wrapped) by Validate for an unusable config.
var ErrBadConfig = errors.New("server: bad config")

// maxSocketPath is the room in sockaddr_un.sun_path, less the NUL.
const maxSocketPath = 107

// fillDefaults gives every zero field that has a default its default; it is
// the one place the defaults are chosen (Validate and Defaults call it).
// The metadata backend's defaults depend on the backend: validateMeta fills
// them in.
func (c *Config) fillDefaults() {
	if c.Socket == "" {
		c.Socket = DefaultSocket()
	}
	if c.SocketMode == 0 {
		c.SocketMode = 0o600
	}
	if c.Meta == "" {
		c.Meta = "local"
	}
	if c.MaxFrame <= 0 {
		c.MaxFrame = protocol.DefaultMaxFrame
	}
	if c.MaxReplyBytes <= 0 {
		c.MaxReplyBytes = DefaultMaxReply
	}
	if c.PrefaultAhead == 0 {
		c.PrefaultAhead = DefaultPrefaultAhead
	}
	if c.SpillLowerRate == 0 {
		c.SpillLowerRate = store.DefaultSpillLowerRate
	}
	if c.SpillUpperRate == 0 {
		c.SpillUpperRate = store.DefaultSpillUpperRate
	}
	if c.SpillWait == 0 {
		c.SpillWait = store.DefaultSpillWait
	}
	if c.MaxPinPages == 0 {
		c.MaxPinPages = MappingBudget()
	}
	if c.MaxConnections == 0 {
		c.MaxConnections = min(DefaultMaxConnections, MappingBudget())
	}
	if c.MaxInflightBytes == 0 {
		c.MaxInflightBytes = DefaultMaxInflightBytes
	}
	if c.FrameTimeout == 0 {
		c.FrameTimeout = DefaultFrameTimeout
	}
	if c.MaxRPCConnections == 0 {
		c.MaxRPCConnections = DefaultMaxRPCConnections
	}
	if c.RegisterTimeout == 0 {
		c.RegisterTimeout = DefaultRegisterTimeout
	}
	if c.ParkAfter == 0 {
		c.ParkAfter = DefaultParkAfter
	}
	if c.StreamCapacity == 0 {
		c.StreamCapacity = streams.DefaultCapacity
	}
	if c.StreamPushTimeout == 0 {
		c.StreamPushTimeout = DefaultStreamPushTimeout
	}
	if c.Deployment == "" {
		c.Deployment = "local"
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.Metrics == nil {
		c.Metrics = metrics.NewRegistry()
	}
}

// Validate fills in the defaults and checks the config: every field, and
// Size against the memory this process may use (memsize.CheckSize).
func (c *Config) Validate() error {
	if c.MaxConnections < 0 || c.MaxPinPages < 0 || c.MaxInflightBytes < 0 || c.FrameTimeout < 0 || c.ParkAfter < 0 ||
		c.MaxRPCConnections < 0 || c.RegisterTimeout < 0 || c.StreamCapacity < 0 || c.StreamPushTimeout < 0 {
		return fmt.Errorf("%w: connection limits must not be negative", ErrBadConfig)
	}
	c.fillDefaults()
	if len(c.Socket) > maxSocketPath {
		return fmt.Errorf("%w: socket path %q is longer than %d bytes", ErrBadConfig, c.Socket, maxSocketPath)
	}
	if c.SocketMode&^fs.ModePerm != 0 {
		return fmt.Errorf("%w: socket mode %v is not a permission", ErrBadConfig, c.SocketMode)
	}
	if c.Size == 0 {
		return fmt.Errorf("%w: size must be positive", ErrBadConfig)
	}
	if c.StreamCapacity > streams.MaxCapacity {
		return fmt.Errorf("%w: stream capacity %d is over %d chunks", ErrBadConfig, c.StreamCapacity, streams.MaxCapacity)
	}
	if err := memsize.CheckSize(c.Size, c.ReserveMemory, c.AllowOvercommit, memsize.ReadMemory()); err != nil {
		return err
	}
	if err := c.validateMeta(); err != nil {
		return err
	}
	if c.MaxReplyBytes > protocol.MaxReplyFrame {
		return fmt.Errorf("%w: replies of at most %d bytes, since clients read no larger frame; %d asked",
			ErrBadConfig, protocol.MaxReplyFrame, c.MaxReplyBytes)
	}
	if err := store.CheckSpillRates(c.SpillLowerRate, c.SpillUpperRate); err != nil {
		return fmt.Errorf("%w: %w", ErrBadConfig, err)
	}
	if c.DirectoryEntries > MaxDirectoryEntries {
		return fmt.Errorf("%w: %d directory entries, at most %d", ErrBadConfig, c.DirectoryEntries, MaxDirectoryEntries)
	}
	return c.validateRPC()
}

// DefaultSocket returns the default socket path: /var/run/vineyard.sock for
// root, else $XDG_RUNTIME_DIR/vineyard.sock, else /tmp/vineyard-<uid>/vineyard.sock.
func DefaultSocket() string {
	if os.Geteuid() == 0 {
		return "/var/run/vineyard.sock"
	}
	if dir := os.Getenv("XDG_RUNTIME_DIR"); dir != "" {
		return filepath.Join(dir, "vineyard.sock")
	}
	return privateDefaultSocket()
}

// privateDefaultSocket is /tmp/vineyard-<uid>/vineyard.sock (socketdir.go
// checks that directory's owner and mode).
func privateDefaultSocket() string { return filepath.Join(privateSocketDir(), "vineyard.sock") }
