// Package client is the Go client of vineyardd over its UNIX socket: the
// logic behind libv6d. It speaks the protocol of docs/protocol.md, maps the
// daemon's arena once per process (read-only for gets, read-write for the
// client's own unsealed blobs), and counts references per blob locally so the
// daemon is told only when the last one goes.
//
// A Client is made of parts chosen at Connect: the transport (wire.go:
// UNIX with fds, or TCP with bytes copied), the dialect (dialect.go: ours,
// upstream's, remote), the local state (refs.go) and the accelerators
// (accel.go), fast paths that may decline, after which the plain protocol
// runs.
//
// Lock order: Client.mu (one request/reply exchange at a time: the wire),
// then Client.state (refs: the local reference tables), then arenas.mu (the process's
// mappings), then views.mu (private views, a leaf). BlobPointer, MapPrivate
// and releases that do not reach zero take only Client.state, so they never
// wait behind a blocking exchange.
package client

import (
	"errors"
	"net"
	"os"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/status"
)

// Version is the version of this client, sent in register_request; set at
// build time from the VERSION file (-X .../internal/client.Version=...).
var Version = "0.1.0"

// SocketEnv is the environment variable Connect reads when given no socket.
const SocketEnv = "VINEYARD_IPC_SOCKET"

// Client is one connection to a daemon. It is safe for concurrent use by many
// goroutines: exchanges with the daemon are serialised, because the protocol
// is strictly one request, one reply.
//
// Slices a Client returns point into shared memory mapped by the process, not
// Go memory. They stay valid while the client holds a reference to the blob
// (see each method), and at the latest until the last Client of the process
// using that arena is closed; touching them afterwards faults.
type Client struct {
	socket        string
	pid           int
	token         uint64 // the process's fork token (fork.go); 0: compare pid
	instanceID    uint64
	daemonVersion string  // register_reply.version; set at Connect
	ext           extSet  // the daemon's extensions (compat.go); set at Connect
	d             dialect // how operations are said to the daemon (dialect.go); set at Connect
	roundTrips    atomic.Uint64
	isClosed      atomic.Bool  // closed, readable without mu
	timeout       atomic.Int64 // time.Duration of each socket operation; set under mu

	mu      sync.Mutex // serialises exchanges; guards w, oneSize and bufferChunks
	w       wire       // the transport (wire.go)
	oneSize [1]uint64  // CreateBuffer's size, as the accelerators take it
	// bufferChunks maps a stream to the blob NewBufferChunk handed out
	// last, pushed by the next one or StopStream (streams.go).
	bufferChunks map[ids.ObjectID]ids.ObjectID

	// The accelerators in use (accel.go), in the order they are asked;
	// set by Connect, read without a lock.
	accels  accelList
	accelOn Accel

	// The local references, the tree cache, the directory's state and
	// the release queue (refs.go); its lock, state.Mutex, is "Client.state".
	state refs

	shapes shapeMap // the daemon's shape numbers → the process's (shape.go)

	dirGets atomic.Uint64 // gets the directory answered
	ownGets atomic.Uint64 // of them, gets answered from this client's own puts (ownput.go)
}

// blob is a blob this client holds: created (and not yet sealed or aborted)
// or referenced (pins > 0, or cached > 0), or whose last reference was
// dropped but not yet released on the daemon (both 0, queued in
// Client.pending).
type blob struct {
	ro     []byte    // read-only view
	rw     []byte    // writable view, for an unsealed blob this client created
	owned  bool      // created by this client and not sealed
	pins   int       // the caller's references (gets, seals)
	cached int       // references of the tree cache (cache.go)
	mem    *localMem // remote mode: the memory of ro/rw, freed by drop (remote.go)
	// hold is the pin slot backing a blob got from the directory that no
	// daemon reference backs (directory.go); dirOnly: the daemon holds no
	// reference to it, so its last release tells the daemon nothing.
	hold    *slotHold
	dirOnly bool
}

// Connect dials the daemon at the UNIX socket path socket (SocketEnv when
// socket is "") and registers. The connect, the registration and every later
// call are bounded by the client's timeout (DefaultTimeout unless
// WithTimeout; see timeout.go). A failure is a *status.Error with code
// ConnectionFailed naming the path tried (Invalid for a bad option). The
// caller MUST Close the client.
func Connect(socket string, opts ...Option) (*Client, error) {
	o := options{timeout: DefaultTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if err := checkTimeout(o.timeout); err != nil {
		return nil, err
	}
	if socket == "" {
		socket = os.Getenv(SocketEnv)
		if socket == "" {
			return nil, status.Errorf(status.ConnectionFailed,
				"no socket given and %s is not set", SocketEnv)
		}
	}
	conn, err := protocol.Dial(socket, o.timeout)
	if errors.Is(err, protocol.ErrTimeout) {
		return nil, status.Errorf(status.ConnectionFailed,
			"cannot connect to vineyardd at %s: no answer within %v (is it stopped or overloaded?)", socket, o.timeout)
	}
	if err != nil {
		return nil, status.Errorf(status.ConnectionFailed,
			"cannot connect to vineyardd at %s: %v", socket, unwrapOp(err))
	}
	want, err := accelOptions(&o)
	if err != nil {
		_ = conn.Close()
		return nil, err
	}
	c := newClient(conn, socket)
	c.timeout.Store(int64(o.timeout))
	var reply protocol.RegisterReply
	exts := protocol.Extensions
	if want&AccelDirectory == 0 {
		exts = slices.DeleteFunc(slices.Clone(exts), func(e string) bool { return e == protocol.ExtDirectory })
	}
	if err := c.call(&protocol.RegisterRequest{Version: Version, Extensions: exts}, &reply); err != nil {
		_ = conn.Close()
		return nil, status.Errorf(status.ConnectionFailed,
			"cannot register with vineyardd at %s: %v", socket, err)
	}
	if reply.Directory != nil { // its fds follow the reply
		c.mu.Lock()
		dir, err := c.w.receiveDirectory(reply.Directory)
		if err != nil {
			err = c.w.lose(err)
		}
		c.mu.Unlock()
		c.state.Lock()
		c.state.dir = dir
		c.state.Unlock()
		if err != nil {
			_ = conn.Close()
			return nil, status.Errorf(status.ConnectionFailed,
				"cannot register with vineyardd at %s: %v", socket, err)
		}
	}
	c.instanceID = reply.InstanceID
	c.daemonVersion = reply.Version
	c.ext = parseExtensions(reply.Extensions)
	if c.ext.metaEpoch {
		c.state.epochOffset = reply.MetaEpochOffset
	}
	c.d = dialectFor(c, false)
	startAccels(c, want)
	return c, nil
}

func newClient(conn *protocol.Sock, socket string) *Client {
	c := &Client{
		socket: socket,
		pid:    os.Getpid(),
		token:  processToken(),
		w:      wire{conn: conn, regions: make(map[int]*arena)},
		state: refs{
			blobs:   make(map[ids.ObjectID]*blob),
			objects: make(map[ids.ObjectID][][]ids.ObjectID),
		},
	}
	c.w.onArena = c.state.noteArenaLocked
	c.state.flush = func() { flushReleases(c) }
	c.state.closed, c.state.connected = c.isClosed.Load, c.Connected
	c.w.onLost = func() {
		c.state.Lock()
		if c.state.dir != nil {
			c.state.dir.lost = true // liveLocal asks Connected, which sees the loss
		}
		c.state.Unlock()
	}
	return c
}

// unwrapOp drops the "dial unix /path:" prefix of a net.OpError, since the
// message names the path already.
func unwrapOp(err error) error {
	var op *net.OpError
	if errors.As(err, &op) && op.Err != nil {
		return op.Err
	}
	return err
}

// Socket returns the path the client connected to.
func (c *Client) Socket() string { return c.socket }

// InstanceID returns the id of the daemon's instance, from registration.
func (c *Client) InstanceID() uint64 { return c.instanceID }

// DaemonVersion returns the version the daemon gave at registration, over
// IPC or RPC (register_reply.version: the upstream release whose protocol it
// speaks, "0.24.2" for ours), as upstream's client.version gives it.
func (c *Client) DaemonVersion() string { return c.daemonVersion }

// Stats are counts of what a client did and holds, for tests and
// benchmarks to check what an operation costs.
type Stats struct {
	// RoundTrips is the number of request/reply exchanges the client's
	// calls made so far, including registration; not the releases the
	// timer sends on its own (release.go), which no call waits for and
	// which come at a time the scheduler picks.
	RoundTrips uint64
	// DirectoryGets is how many gets the directory answered (directory.go);
	// OwnPutGets, how many of them were answered from this client's own
	// puts before the daemon handled them (ownput.go).
	DirectoryGets, OwnPutGets uint64
	// Directory: the client got a directory at registration; PinsInUse
	// is the pin slots it uses.
	Directory bool
	PinsInUse int
	// Holds is the number of live leases and private views (retain.go).
	Holds int
}

// Stats returns the client's counts now.
func (c *Client) Stats() Stats {
	s := Stats{RoundTrips: c.roundTrips.Load(), DirectoryGets: c.dirGets.Load(), OwnPutGets: c.ownGets.Load()}
	c.state.Lock()
	if d := c.state.dir; d != nil {
		s.Directory, s.PinsInUse = true, d.pins.InUse()
	}
	c.state.Unlock()
	views.mu.Lock()
	s.Holds = views.live[c]
	views.mu.Unlock()
	return s
}

// Close sends exit_request, closes the connection and drops the client's
// mappings; the daemon then releases every reference the connection held and
// frees its unsealed blobs. Slices returned by this client stay readable
// while another Client of the process maps the same arena. While private
// views of the client are live (MapPrivate), the connection and mappings stay
// until the last is unmapped; the client refuses calls from now on either
// way. Close is idempotent. In a forked child it does nothing and returns
// ErrForked: the connection is the parent's.
func (c *Client) Close() error {
	if c.forked() {
		return ErrForked
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.w.closed {
		return nil
	}
	c.w.closed = true
	c.isClosed.Store(true)
	c.state.Lock()
	c.state.dropQueueLocked() // its memory may go once Close returns
	c.state.Unlock()
	if waitForViews(c) {
		return nil // the last UnmapPrivate disconnects
	}
	return c.disconnectLocked()
}

// disconnectLocked does the work of Close. c.mu must be held.
func (c *Client) disconnectLocked() error {
	if c.w.lost == nil {
		c.w.wbuf = c.w.wbuf[:0]
		if err := c.w.encode(&protocol.ExitRequest{}); err == nil {
			_, _ = c.w.conn.Write(c.w.wbuf)
		}
	}
	err := c.w.conn.Close()
	c.state.Lock()
	for _, b := range c.state.blobs {
		b.drop()
	}
	clear(c.state.blobs)
	clear(c.state.objects)
	c.state.pending = nil // the daemon releases everything at disconnect
	c.state.cache.entries = nil
	c.state.closeDirectoryLocked() // the daemon forgets the pins with the connection
	c.state.Unlock()
	for fd, a := range c.w.regions {
		a.detach()
		delete(c.w.regions, fd)
	}
	if err != nil && c.w.lost == nil {
		return status.Errorf(status.IOError, "close connection: %v", err)
	}
	return nil
}

// usableLocked reports why the client cannot make a request now, or nil. c.mu must
// be held.
func (c *Client) usableLocked() error {
	if c.forked() {
		return ErrForked
	}
	if c.w.closed {
		return ErrClosed
	}
	return c.w.lost
}

// call makes one exchange: it sends req and then the raw bytes of
// trailing (an inline put's blobs), reads the reply into reply, and
// receives the fds the reply announces. It takes c.mu.
func (c *Client) call(req protocol.Request, reply protocol.Reply, trailing ...[]byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.callLocked(req, reply, trailing...)
}

// callLocked is call with c.mu held. Releases the client deferred go
// ahead of req, in the same write (see release.go), and what the
// accelerators must send first (accelerator.ahead).
func (c *Client) callLocked(req protocol.Request, reply protocol.Reply, trailing ...[]byte) error {
	if err := c.usableLocked(); err != nil {
		return err
	}
	c.state.Lock()
	c.state.validateCacheLocked() // references kept for deleted objects go out with this request
	rel := c.state.takeReleasesLocked()
	c.state.Unlock()
	ahead := c.ext.releaseRequests(rel)
	for _, a := range c.accels {
		if first := a.ahead(req); first != nil {
			ahead = append([]protocol.Request{first}, ahead...)
		}
	}
	c.roundTrips.Add(1)
	return c.w.exchange(req, reply, ahead, trailing)
}

// decodeReply decodes body into reply. An error reply is returned as its
// *status.Error; a body that is not a reply of type want is an error with
// fatal set: the connection is out of step with the daemon (it may have sent
// fds the client cannot account for).
func decodeReply(body []byte, want string, reply protocol.Reply) (fatal bool, err error) {
	if err := protocol.UnmarshalReply(body, reply); err != nil {
		return true, errBadReply("%v", err)
	}
	h := reply.ReplyHeader()
	if err := h.Err(); err != nil {
		return false, err
	}
	if h.Type != want {
		return true, errBadReply("type %q, want %q", h.Type, want)
	}
	return false, nil
}

// announcedFds returns the daemon fd numbers whose fds follow the reply.
func announcedFds(reply protocol.Reply) []int {
	switch r := reply.(type) {
	case *protocol.CreateBufferReply:
		if r.Fd >= 0 {
			return []int{r.Fd}
		}
	case *protocol.BuffersReply:
		return r.Fds
	case *protocol.GetDataReply:
		return r.Fds
	}
	return nil
}

// check is usableLocked for methods that make no exchange; it takes no lock,
// so it never waits behind a blocking exchange.
func (c *Client) check() error {
	if c.forked() {
		return ErrForked
	}
	if c.isClosed.Load() {
		return ErrClosed
	}
	return nil
}
