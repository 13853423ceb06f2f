package peer

import (
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// Defaults of ServerConfig and ClientConfig; docs/cluster-data-plane.md
// explains the choice.
const (
	DefaultChunkSize    = 1 << 20
	MaxChunkSize        = 4 << 20
	DefaultSplitAbove   = 16 << 20
	DefaultStreamWindow = 4 << 20
	DefaultConnWindow   = 16 << 20
	DefaultBufferSize   = 256 << 10
	DefaultIdleTimeout  = 10 * time.Second
	// DefaultStallTimeout is how long a stream may make no progress (no
	// chunk taken by gRPC: its client stopped reading) before the server
	// closes its connection and releases its pins.
	DefaultStallTimeout = 30 * time.Second
	// DefaultMaxPeerStreams is how many fetch streams one peer (one IP
	// address) may have served at once, over all its connections.
	DefaultMaxPeerStreams = 64

	// maxRequestBytes caps a FetchRequest (maxRanges ranges of ~25 bytes).
	maxRequestBytes = 2 << 20
	// maxConcurrentStreams caps the streams of one connection on a server.
	maxConcurrentStreams = 64
)

// DefaultMaxStreams is how many streams (each on its own TCP connection) a
// fetch above DefaultSplitAbove uses by default: one per core, at most 4.
// Each stream has a reader and a writer goroutine per side that copy at
// memory speed, so streams beyond the cores only contend; measured on 2
// cores (BenchmarkMigrate, docs/performance.md) 2 streams moved 1 GiB at
// 1.05x a raw loopback socket, 4 at 0.99x and 1 at 0.57x.
var DefaultMaxStreams = min(4, max(1, runtime.NumCPU()))

// ServerConfig configures a Server. Zero fields take the defaults above.
type ServerConfig struct {
	// Addr is the host:port to listen on (Listen only); default
	// "127.0.0.1:0". A non-loopback address needs Secret or TLS.CA.
	Addr string
	// Secret, when set, must come with every call (see ClientConfig.Secret).
	Secret string
	// TLS, when TLS.Cert is set, serves TLS; with TLS.CA, clients must
	// present a certificate signed by it.
	TLS TLSFiles
	// ChunkSize is the payload of one message (at most MaxChunkSize).
	ChunkSize int
	// SplitAbove is the size of a fetch above which it is served over
	// several streams (up to the client's MaxStreams).
	SplitAbove int64
	// StreamWindow and ConnWindow are the HTTP/2 receive windows (bytes a
	// peer may send before we read); BufferSize the socket read and write
	// buffers of gRPC.
	StreamWindow, ConnWindow int32
	BufferSize               int
	// StallTimeout: DefaultStallTimeout when zero.
	StallTimeout time.Duration
	// MaxPeerStreams: DefaultMaxPeerStreams when zero.
	MaxPeerStreams int
	// RawAbove: a stream carrying at least this many bytes, for a client
	// that asks, moves them over a raw data connection (raw.go); 0 means
	// DefaultRawAbove, negative never. TLS turns the raw path off.
	RawAbove int64
}

// raw reports whether streams may use raw data connections.
func (c *ServerConfig) raw() bool { return c.RawAbove >= 0 && !c.TLS.enabled() }

func (c *ServerConfig) setDefaults() error {
	if c.Addr == "" {
		c.Addr = "127.0.0.1:0"
	}
	if c.ChunkSize == 0 {
		c.ChunkSize = DefaultChunkSize
	}
	if c.ChunkSize < 1 || c.ChunkSize > MaxChunkSize {
		return fmt.Errorf("peer: chunk size %d not in [1, %d]", c.ChunkSize, MaxChunkSize)
	}
	if c.SplitAbove == 0 {
		c.SplitAbove = DefaultSplitAbove
	}
	if c.RawAbove == 0 {
		c.RawAbove = DefaultRawAbove
	}
	if c.StreamWindow == 0 {
		c.StreamWindow = DefaultStreamWindow
	}
	if c.ConnWindow == 0 {
		c.ConnWindow = DefaultConnWindow
	}
	if c.BufferSize == 0 {
		c.BufferSize = DefaultBufferSize
	}
	if c.StallTimeout == 0 {
		c.StallTimeout = DefaultStallTimeout
	}
	if c.MaxPeerStreams == 0 {
		c.MaxPeerStreams = DefaultMaxPeerStreams
	}
	if c.StallTimeout < 0 || c.MaxPeerStreams < 0 {
		return errors.New("peer: negative stall timeout or peer stream cap")
	}
	if err := checkWindows(c.StreamWindow, c.ConnWindow, c.BufferSize); err != nil {
		return err
	}
	if c.TLS.enabled() && (c.TLS.Cert == "" || c.TLS.Key == "") {
		return errors.New("peer: server tls needs a certificate and a key")
	}
	return nil
}

// minWindow is HTTP/2's initial window: gRPC ignores smaller settings.
const minWindow = 64 << 10

// checkWindows rejects windows gRPC would silently ignore and negative
// buffer sizes.
func checkWindows(stream, conn int32, buf int) error {
	if stream < minWindow || conn < minWindow {
		return fmt.Errorf("peer: windows of %d and %d bytes: at least %d each", stream, conn, minWindow)
	}
	if buf < 0 {
		return fmt.Errorf("peer: buffer size %d", buf)
	}
	return nil
}

// authenticated reports whether peers must prove who they are.
func (c *ServerConfig) authenticated() bool { return c.Secret != "" || c.TLS.CA != "" }

// Server serves the peer service for one Source.
type Server struct {
	cfg  ServerConfig
	src  Source
	grpc *grpc.Server
	lis  net.Listener
	// claims matches raw data connections with their streams.
	claims rawClaims
	// rawServed counts the streams served over raw data connections.
	rawServed atomic.Int64

	mu     sync.Mutex
	closed bool
	conns  map[string]net.Conn // open connections by remote address (stall.go)
	active map[string]int      // fetch streams being served, by peer IP (stall.go)
}

// NewServer makes a server for src; Serve or Listen starts it.
func NewServer(cfg ServerConfig, src Source) (*Server, error) {
	if src == nil {
		return nil, errors.New("peer: nil Source")
	}
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, src: src, conns: map[string]net.Conn{}, active: map[string]int{}}
	opts := []grpc.ServerOption{
		grpc.ForceServerCodecV2(codec{}),
		grpc.InitialWindowSize(cfg.StreamWindow),
		grpc.InitialConnWindowSize(cfg.ConnWindow),
		grpc.WriteBufferSize(cfg.BufferSize),
		grpc.ReadBufferSize(cfg.BufferSize),
		grpc.MaxRecvMsgSize(maxRequestBytes),
		grpc.MaxConcurrentStreams(maxConcurrentStreams),
		// Close relies on Stop waiting for handlers: each releases its
		// pin when it returns.
		grpc.WaitForHandlers(true),
		grpc.KeepaliveEnforcementPolicy(keepalive.EnforcementPolicy{MinTime: 5 * time.Second, PermitWithoutStream: true}),
		grpc.KeepaliveParams(keepalive.ServerParameters{Time: 30 * time.Second, Timeout: 10 * time.Second}),
	}
	if cfg.TLS.enabled() {
		creds, err := transportCreds(cfg.TLS, true)
		if err != nil {
			return nil, err
		}
		opts = append(opts, grpc.Creds(creds))
	}
	opts = append(opts, grpc.StreamInterceptor(authCheck(&s.cfg)))
	s.grpc = grpc.NewServer(opts...)
	s.grpc.RegisterService(&serviceDesc, s)
	return s, nil
}

// Listen makes a server for src listening on cfg.Addr and serves it in the
// background. It refuses a non-loopback address unless peers authenticate.
func Listen(cfg ServerConfig, src Source) (*Server, error) {
	s, err := NewServer(cfg, src)
	if err != nil {
		return nil, err
	}
	if !isLoopback(s.cfg.Addr) && !s.cfg.authenticated() {
		return nil, fmt.Errorf("%w: %s (set a shared secret or a TLS CA for client certificates)", ErrInsecure, s.cfg.Addr)
	}
	lis, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("peer: listen: %w", err)
	}
	s.mu.Lock()
	s.lis = lis
	s.mu.Unlock()
	go func() { _ = s.Serve(lis) }()
	return s, nil
}

// Serve serves on lis until Close; it returns nil after Close. The caller
// chose lis, so no loopback rule applies here.
func (s *Server) Serve(lis net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = lis.Close()
		return ErrClosed
	}
	if s.cfg.raw() {
		lis = newSniffListener(lis, s.claims.claim)
	}
	s.lis = lis
	s.mu.Unlock()
	err := s.grpc.Serve(&trackListener{Listener: lis, s: s})
	if errors.Is(err, grpc.ErrServerStopped) {
		return nil
	}
	return err
}

// Addr is the address the server listens on, once Listen or Serve ran.
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lis == nil {
		return ""
	}
	return s.lis.Addr().String()
}

// Close stops the server at once: connections are closed, running fetches
// fail on their clients, and every pin is released before Close returns.
// It is idempotent.
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	s.mu.Unlock()
	s.grpc.Stop()
	return nil
}

// fetcher is the handler type of serviceDesc.
type fetcher interface {
	fetch(req *fetchRequest, ss grpc.ServerStream) error
}

var serviceDesc = grpc.ServiceDesc{
	ServiceName: "v6d.peer.v1.Peer",
	HandlerType: (*fetcher)(nil),
	Streams: []grpc.StreamDesc{{
		StreamName:    "Fetch",
		ServerStreams: true,
		Handler: func(srv any, ss grpc.ServerStream) error {
			var req fetchRequest
			if err := ss.RecvMsg(&req); err != nil {
				return err
			}
			f, ok := srv.(fetcher)
			if !ok {
				return status.Error(codes.Internal, "peer: bad service")
			}
			return f.fetch(&req, ss)
		},
	}},
	Metadata: "peerpb/peer.proto",
}

func (s *Server) fetch(req *fetchRequest, ss grpc.ServerStream) (err error) {
	if len(req.Ranges) == 0 {
		return status.Error(codes.InvalidArgument, "peer: no ranges")
	}
	w, err := s.admit(ss.Context())
	if err != nil {
		return err
	}
	defer w.done()
	// Pin each blob once, in first-seen order.
	pos := make(map[ids.ObjectID]int, len(req.Ranges))
	var blobs []ids.ObjectID
	for _, r := range req.Ranges {
		if !r.Blob.IsBlob() {
			return status.Errorf(codes.InvalidArgument, "peer: %v is not a blob id", r.Blob)
		}
		if _, ok := pos[r.Blob]; !ok {
			pos[r.Blob] = len(blobs)
			blobs = append(blobs, r.Blob)
		}
	}
	views, unpin, err := s.src.Pin(blobs)
	if err != nil {
		if errors.Is(err, ErrObjectNotExists) {
			return status.Error(codes.NotFound, err.Error())
		}
		return status.Error(codes.Unavailable, err.Error())
	}
	if len(views) != len(blobs) {
		unpin()
		return status.Errorf(codes.Internal, "peer: source returned %d views for %d blobs", len(views), len(blobs))
	}
	pin := newPinRef(unpin)
	defer func() { finish(pin, err) }()

	sizes := make([]uint64, len(req.Ranges))
	for i, r := range req.Ranges {
		sizes[i] = uint64(len(views[pos[r.Blob]]))
	}
	ps, err := resolve(req.Ranges, sizes)
	if err != nil {
		return status.Error(codes.InvalidArgument, err.Error())
	}
	hdr := header{Sizes: sizes}
	served := ps
	var total, distinct uint64
	for _, p := range ps {
		total += p.end - p.off
	}
	for _, v := range views {
		distinct += uint64(len(v))
	}
	if total > distinct {
		// Each blob's bytes at most once per request: a request naming one
		// blob many times must not make the server send it as many times.
		return status.Errorf(codes.InvalidArgument,
			"peer: the ranges ask for %d bytes, more than the %d bytes of the %d distinct blobs they name", total, distinct, len(views))
	}
	if streams := min(int(req.MaxStreams), maxConcurrentStreams/2); streams > 1 && total > uint64(s.cfg.SplitAbove) {
		hdr.Plan = split(ps, req.Ranges, streams, uint64(s.cfg.ChunkSize))
		if served, err = resolvePlan0(hdr.Plan[0], req.Ranges); err != nil {
			return status.Error(codes.Internal, err.Error())
		}
	}
	var bytes uint64
	for _, p := range served {
		bytes += p.end - p.off
	}
	if req.Raw && s.cfg.raw() && bytes >= uint64(s.cfg.RawAbove) {
		return s.serveRaw(ss, &hdr, served, views, pos, req.Ranges)
	}
	if err := ss.SendMsg(&hdr); err != nil {
		return err
	}
	w.progress()
	chunk := uint64(s.cfg.ChunkSize)
	for _, p := range served {
		view := views[pos[req.Ranges[p.blob].Blob]]
		for off := p.off; off < p.end; {
			n := min(chunk, p.end-off)
			msg := outChunk{Index: uint32(p.blob), Offset: off, Data: view[off : off+n], pin: pin}
			if err := ss.SendMsg(&msg); err != nil {
				return err
			}
			w.progress()
			off += n
		}
	}
	// Return only once gRPC has written every chunk. A handler that returns
	// queues the status behind the data and marks the stream done; a client
	// that gives up on the stream then (it failed elsewhere) resets it, but
	// gRPC-go ignores the reset of a done stream, and the unsent chunks (and
	// so the pin) would wait for a window update that never comes. While the
	// handler waits, a reset cancels the stream's context, and gRPC frees the
	// queued chunks.
	if err := pin.wait(ss.Context().Done()); err != nil {
		return status.Error(codes.Canceled, err.Error())
	}
	return nil
}

// serveRaw sends the header with a ticket, waits for the client's raw data
// connection and writes the served pieces over it. It returns once every
// byte is written (handed to the kernel), so the pin may go.
func (s *Server) serveRaw(ss grpc.ServerStream, hdr *header, served []piece, views [][]byte, pos map[ids.ObjectID]int, ranges []Range) error {
	t, conns, done, err := s.claims.expect()
	if err != nil {
		return status.Error(codes.Internal, err.Error())
	}
	defer done()
	hdr.Ticket = t[:]
	if err := ss.SendMsg(hdr); err != nil {
		return err
	}
	ctx := ss.Context()
	wait := time.NewTimer(DefaultIdleTimeout)
	defer wait.Stop()
	var c net.Conn
	select {
	case c = <-conns:
	case <-ctx.Done():
		return status.FromContextError(ctx.Err()).Err()
	case <-wait.C:
		return status.Errorf(codes.DeadlineExceeded, "peer: no data connection within %v", DefaultIdleTimeout)
	}
	defer func() { _ = c.Close() }()
	s.rawServed.Add(1)
	pieces := make([][]byte, len(served))
	for i, p := range served {
		pieces[i] = views[pos[ranges[p.blob].Blob]][p.off:p.end]
	}
	if err := sendRaw(ctx, c, pieces, DefaultIdleTimeout); err != nil {
		return status.Errorf(codes.Unavailable, "peer: data connection: %v", err)
	}
	return nil
}

// resolvePlan0 maps the first plan entry (whole-blob offsets) to pieces
// indexed by the request ranges of their blobs.
func resolvePlan0(rs []Range, req []Range) ([]piece, error) {
	at := make(map[ids.ObjectID]int, len(req))
	for i, r := range req {
		if _, ok := at[r.Blob]; !ok {
			at[r.Blob] = i
		}
	}
	ps := make([]piece, 0, len(rs))
	for _, r := range rs {
		i, ok := at[r.Blob]
		if !ok {
			return nil, fmt.Errorf("peer: plan names %v, not in the request", r.Blob)
		}
		ps = append(ps, piece{blob: i, off: r.Offset, end: r.Offset + r.Length})
	}
	return ps, nil
}

// finish releases the pin of a stream whose handler returns with err.
//
// On success the handler waited until gRPC released every chunk (wrote it
// out), so this drops the last reference and unpins. On failure gRPC may
// still hold chunks: queued behind a reset, or dropped without being
// released (gRPC-go discards data queued for a stream it already cleaned
// up without freeing it, so waiting for them could take forever). They are
// unpinned at once all the same: a stream that ends in an error is never
// committed by the client, so whatever gRPC might still send for it, even
// from memory reused meanwhile, is discarded. The arena stays mapped while
// the server runs (Close before unmapping it), so reading it stays safe.
func finish(pin *pinRef, err error) {
	if err != nil {
		pin.force()
		return
	}
	pin.release()
}
