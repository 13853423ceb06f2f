package peer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/status"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// ClientConfig configures a Client. Zero fields take the defaults of
// ServerConfig's constants.
type ClientConfig struct {
	// Secret is sent with every call when set.
	Secret string
	// TLS, when any file is set, connects with TLS (see TLSFiles).
	TLS TLSFiles
	// MaxStreams is how many streams one fetch may use (1 = never split).
	MaxStreams int
	// IdleTimeout bounds the wait for the next message on a stream,
	// including the connection and the source's Pin: a dead or unreachable
	// source fails the fetch with ErrStalled after at most this long.
	IdleTimeout time.Duration
	// StreamWindow, ConnWindow and BufferSize: as in ServerConfig. The
	// stream window bounds what a source may send ahead of what this client
	// decoded, per stream.
	StreamWindow, ConnWindow int32
	BufferSize               int
	// NoRaw keeps every byte inside gRPC messages: the client never asks
	// for raw data connections (raw.go). With TLS it never does anyway.
	NoRaw bool
	// Dialer, when set, makes the connections (tests use it to cut them).
	Dialer func(ctx context.Context, addr string) (net.Conn, error)
}

func (c *ClientConfig) setDefaults() error {
	if c.MaxStreams <= 0 {
		c.MaxStreams = DefaultMaxStreams
	}
	if c.IdleTimeout <= 0 {
		c.IdleTimeout = DefaultIdleTimeout
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
	return checkWindows(c.StreamWindow, c.ConnWindow, c.BufferSize)
}

// Client fetches blobs from peers into a Sink. It keeps one gRPC connection
// per endpoint and is safe for concurrent use.
type Client struct {
	cfg  ClientConfig
	sink Sink
	opts []grpc.DialOption

	mu     sync.Mutex
	conns  map[string][]*grpc.ClientConn // MaxStreams connections per endpoint
	closed bool
}

// NewClient makes a client that stores what it fetches in sink.
func NewClient(cfg ClientConfig, sink Sink) (*Client, error) {
	if sink == nil {
		return nil, errors.New("peer: nil Sink")
	}
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	opts := []grpc.DialOption{
		grpc.WithDefaultCallOptions(grpc.ForceCodecV2(codec{}), grpc.MaxCallRecvMsgSize(MaxChunkSize+64)),
		grpc.WithInitialWindowSize(cfg.StreamWindow),
		grpc.WithInitialConnWindowSize(cfg.ConnWindow),
		grpc.WithWriteBufferSize(cfg.BufferSize),
		grpc.WithReadBufferSize(cfg.BufferSize),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 10 * time.Second, Timeout: 5 * time.Second}),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 50 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: cfg.IdleTimeout,
		}),
	}
	if cfg.Dialer != nil {
		opts = append(opts, grpc.WithContextDialer(cfg.Dialer))
	}
	if cfg.TLS.enabled() {
		creds, err := transportCreds(cfg.TLS, false)
		if err != nil {
			return nil, err
		}
		opts = append(opts, grpc.WithTransportCredentials(creds))
	} else {
		opts = append(opts, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	if cfg.Secret != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(secretCreds{cfg.Secret}))
	}
	return &Client{cfg: cfg, sink: sink, opts: opts, conns: map[string][]*grpc.ClientConn{}}, nil
}

// Close closes every connection; fetches running on them fail. Idempotent.
func (c *Client) Close() error {
	c.mu.Lock()
	conns := c.conns
	c.conns = map[string][]*grpc.ClientConn{}
	c.closed = true
	c.mu.Unlock()
	for _, ccs := range conns {
		for _, cc := range ccs {
			_ = cc.Close()
		}
	}
	return nil
}

// dial returns the connections to endpoint: one per stream of a fetch, so
// that the streams of a split fetch are carried by separate TCP connections,
// each with its own gRPC reader and writer goroutines (streams sharing one
// connection share those two goroutines and gain nothing).
func (c *Client) dial(endpoint string) ([]*grpc.ClientConn, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, ErrClosed
	}
	if ccs, ok := c.conns[endpoint]; ok {
		return ccs, nil
	}
	ccs := make([]*grpc.ClientConn, c.cfg.MaxStreams)
	for i := range ccs {
		cc, err := grpc.NewClient(endpoint, c.opts...)
		if err != nil {
			for _, cc := range ccs[:i] {
				_ = cc.Close()
			}
			return nil, fmt.Errorf("%w: endpoint %q: %w", ErrBadRequest, endpoint, err)
		}
		ccs[i] = cc
	}
	c.conns[endpoint] = ccs
	return ccs, nil
}

// evict drops the connections to endpoint after a failed fetch, so a retry
// dials afresh instead of waiting out gRPC's reconnect backoff.
func (c *Client) evict(endpoint string, ccs []*grpc.ClientConn) {
	c.mu.Lock()
	if cur, ok := c.conns[endpoint]; ok && len(cur) > 0 && cur[0] == ccs[0] {
		delete(c.conns, endpoint)
	} else {
		ccs = nil
	}
	c.mu.Unlock()
	for _, cc := range ccs {
		_ = cc.Close()
	}
}

var fetchDesc = grpc.StreamDesc{StreamName: "Fetch", ServerStreams: true}

const fetchMethod = "/v6d.peer.v1.Peer/Fetch"

// Fetch copies the given blobs from the peer at endpoint (host:port) into
// new blobs of the Sink and returns them in the order of blobs. It either
// commits every blob or none: on any failure the Transfer is aborted (after
// every stream has stopped writing into it) and the error says why
// (ErrObjectNotExists, ErrUnauthenticated, ErrStalled, ErrProtocol, the
// Sink's allocation error, or a transport error). It returns within
// IdleTimeout of the source going silent, or when ctx ends.
func (c *Client) Fetch(ctx context.Context, endpoint string, blobs []ids.ObjectID) ([]LocalBlob, error) {
	if endpoint == "" {
		return nil, fmt.Errorf("%w: empty endpoint", ErrBadRequest)
	}
	if len(blobs) == 0 || len(blobs) > maxRanges {
		return nil, fmt.Errorf("%w: %d blob ids (want 1 to %d)", ErrBadRequest, len(blobs), maxRanges)
	}
	seen := make(map[ids.ObjectID]struct{}, len(blobs))
	for _, id := range blobs {
		if !id.IsBlob() {
			return nil, fmt.Errorf("%w: %v is not a blob id", ErrBadRequest, id)
		}
		if _, dup := seen[id]; dup {
			return nil, fmt.Errorf("%w: %v requested twice", ErrBadRequest, id)
		}
		seen[id] = struct{}{}
	}
	ccs, err := c.dial(endpoint)
	if err != nil {
		return nil, err
	}
	tr, err := c.sink.Begin()
	if err != nil {
		return nil, fmt.Errorf("peer: begin transfer: %w", err)
	}
	f := &fetch{c: c, endpoint: endpoint, ccs: ccs, blobs: blobs, tr: tr}
	out, err := f.run(ctx)
	if err != nil {
		f.tr.Abort()
		if f.transportFailed {
			c.evict(endpoint, ccs)
		}
		return nil, fmt.Errorf("peer: fetch from %s: %w", endpoint, err)
	}
	return out, nil
}

// fetch is one Fetch call.
type fetch struct {
	c        *Client
	endpoint string
	ccs      []*grpc.ClientConn
	blobs    []ids.ObjectID
	tr       Transfer
	sizes    []uint64
	dst      [][]byte

	transportFailed bool // set by run's goroutine only after wg.Wait
}

// stream is one open Fetch stream, after its header.
type stream struct {
	cs     grpc.ClientStream
	hdr    header
	ranges []Range
	watch  *time.Timer
}

func (f *fetch) run(parent context.Context) ([]LocalBlob, error) {
	ctx, cancel := context.WithCancelCause(parent)
	defer cancel(nil)

	whole := make([]Range, len(f.blobs))
	for i, id := range f.blobs {
		whole[i] = Range{Blob: id}
	}
	s0, err := f.open(ctx, cancel, 0, whole, f.c.cfg.MaxStreams)
	if err != nil {
		return nil, f.cause(parent, ctx, err)
	}
	if len(s0.hdr.Sizes) != len(f.blobs) {
		s0.close()
		return nil, fmt.Errorf("%w: %d sizes for %d blobs", ErrProtocol, len(s0.hdr.Sizes), len(f.blobs))
	}
	f.sizes = s0.hdr.Sizes
	f.dst = make([][]byte, len(f.blobs))
	for i, id := range f.blobs {
		if f.dst[i], err = f.tr.Alloc(id, f.sizes[i]); err != nil {
			s0.close()
			return nil, fmt.Errorf("allocate %d bytes for %v: %w", f.sizes[i], id, err)
		}
		if uint64(len(f.dst[i])) != f.sizes[i] {
			s0.close()
			return nil, fmt.Errorf("peer: sink gave %d bytes for %d", len(f.dst[i]), f.sizes[i])
		}
	}
	plan := s0.hdr.Plan
	first, err := f.expect(plan, whole)
	if err != nil {
		s0.close()
		return nil, err
	}

	errs := make(chan error, max(len(plan), 1))
	var wg sync.WaitGroup
	wg.Go(func() { errs <- f.receive(ctx, cancel, s0, first) })
	for k, rs := range plan[min(1, len(plan)):] {
		wg.Go(func() {
			s, err := f.open(ctx, cancel, k+1, rs, 1)
			if err == nil {
				err = f.checkSizes(s, rs)
			}
			if err != nil {
				if s != nil {
					s.close()
				}
				cancel(err)
				errs <- err
				return
			}
			ps, _ := resolve(rs, s.hdr.Sizes)
			errs <- f.receive(ctx, cancel, s, ps)
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		if e != nil {
			return nil, f.cause(parent, ctx, e)
		}
	}
	out, err := f.tr.Commit()
	if err != nil {
		// Commit cleaned up after itself: do not Abort as well.
		f.tr = nopTransfer{}
		return nil, fmt.Errorf("commit: %w", err)
	}
	return out, nil
}

// cause turns a stream error into the error Fetch reports, and notes
// transport failures (the connection is then dropped from the cache).
func (f *fetch) cause(parent, ctx context.Context, err error) error {
	if parent.Err() != nil {
		return fmt.Errorf("%w (%w)", context.Cause(parent), err)
	}
	if c := context.Cause(ctx); c != nil && !errors.Is(c, context.Canceled) {
		if errors.Is(c, ErrStalled) {
			f.transportFailed = true
		}
		err = c
	}
	if errors.Is(err, ErrUnavailable) || errors.Is(err, ErrStalled) {
		f.transportFailed = true
	}
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	switch st.Code() {
	case codes.NotFound:
		return fmt.Errorf("%w: %s", ErrObjectNotExists, st.Message())
	case codes.Unauthenticated:
		return fmt.Errorf("%w: %s", ErrUnauthenticated, st.Message())
	case codes.InvalidArgument:
		return fmt.Errorf("%w: %s", ErrBadRequest, st.Message())
	case codes.Unavailable:
		f.transportFailed = true
		return fmt.Errorf("%w: %s", ErrUnavailable, st.Message())
	case codes.Internal, codes.Unknown:
		f.transportFailed = true
	case codes.Canceled, codes.DeadlineExceeded:
		if ctx.Err() == nil {
			f.transportFailed = true
		}
	}
	return err
}

// open starts stream k of the fetch, for ranges, and reads its header. Until the stream
// ends, each wait for a message longer than IdleTimeout cancels the fetch
// with ErrStalled.
func (f *fetch) open(ctx context.Context, cancel context.CancelCauseFunc, k int, ranges []Range, streams int) (*stream, error) {
	idle := f.c.cfg.IdleTimeout
	watch := time.AfterFunc(idle, func() {
		cancel(fmt.Errorf("%w: nothing received for %v", ErrStalled, idle))
	})
	cs, err := f.ccs[k%len(f.ccs)].NewStream(ctx, &fetchDesc, fetchMethod)
	if err != nil {
		watch.Stop()
		return nil, err
	}
	s := &stream{cs: cs, ranges: ranges, watch: watch}
	req := fetchRequest{Ranges: ranges, MaxStreams: uint32(streams), Raw: !f.c.cfg.NoRaw && !f.c.cfg.TLS.enabled()}
	if err := cs.SendMsg(&req); err != nil && !errors.Is(err, io.EOF) {
		s.close()
		return nil, err
	}
	if err := cs.CloseSend(); err != nil {
		s.close()
		return nil, err
	}
	if err := cs.RecvMsg(&s.hdr); err != nil {
		s.close()
		return nil, err
	}
	watch.Reset(idle)
	return s, nil
}

// close stops the watchdog; the stream itself ends with the fetch context.
func (s *stream) close() { s.watch.Stop() }

// checkSizes verifies that a further stream's header agrees with the first.
func (f *fetch) checkSizes(s *stream, rs []Range) error {
	if len(s.hdr.Sizes) != len(rs) {
		return fmt.Errorf("%w: %d sizes for %d ranges", ErrProtocol, len(s.hdr.Sizes), len(rs))
	}
	for i, r := range rs {
		if s.hdr.Sizes[i] != f.sizes[f.index(r.Blob)] {
			return fmt.Errorf("%w: %v changed size between streams", ErrProtocol, r.Blob)
		}
	}
	return nil
}

func (f *fetch) index(id ids.ObjectID) int {
	for i, b := range f.blobs {
		if b == id {
			return i
		}
	}
	return -1
}

// expect checks that plan covers every byte of every blob exactly once in
// order, and returns the pieces of the first stream (indexed by request
// position, as the source sends them).
func (f *fetch) expect(plan [][]Range, whole []Range) ([]piece, error) {
	if len(plan) == 0 {
		return resolve(whole, f.sizes)
	}
	if len(plan) > f.c.cfg.MaxStreams {
		return nil, fmt.Errorf("%w: plan of %d streams, asked for at most %d", ErrProtocol, len(plan), f.c.cfg.MaxStreams)
	}
	next := make([]uint64, len(f.blobs))
	var first []piece
	for k, rs := range plan {
		if len(rs) == 0 {
			return nil, fmt.Errorf("%w: empty plan entry", ErrProtocol)
		}
		for _, r := range rs {
			i := f.index(r.Blob)
			if i < 0 || r.Length == 0 || r.Offset != next[i] || r.Length > f.sizes[i]-r.Offset {
				return nil, fmt.Errorf("%w: plan range %v [%d, +%d) out of place", ErrProtocol, r.Blob, r.Offset, r.Length)
			}
			next[i] += r.Length
			if k == 0 {
				first = append(first, piece{blob: i, off: r.Offset, end: r.Offset + r.Length})
			}
		}
	}
	for i, n := range next {
		if n != f.sizes[i] {
			return nil, fmt.Errorf("%w: plan covers %d of %d bytes of %v", ErrProtocol, n, f.sizes[i], f.blobs[i])
		}
	}
	return first, nil
}

// receive decodes the chunks of one stream straight into the destination,
// checking that they arrive exactly as the pieces say, in order.
func (f *fetch) receive(ctx context.Context, cancel context.CancelCauseFunc, s *stream, ps []piece) error {
	defer s.close()
	fail := func(err error) error {
		cancel(err)
		return err
	}
	if len(s.hdr.Ticket) > 0 {
		if err := f.receiveRaw(ctx, s, ps); err != nil {
			return fail(err)
		}
		return nil
	}
	cur := 0
	for cur < len(ps) && ps[cur].off == ps[cur].end {
		cur++
	}
	var m inChunk
	m.dest = func(index uint32, offset uint64, n int) ([]byte, error) {
		if cur >= len(ps) || int(index) >= len(s.ranges) {
			return nil, fmt.Errorf("%w: unexpected chunk", ErrProtocol)
		}
		p := &ps[cur]
		blob := f.index(s.ranges[index].Blob)
		if blob < 0 || blob != f.index(s.ranges[p.blob].Blob) || offset != p.off || n == 0 || uint64(n) > p.end-p.off {
			return nil, fmt.Errorf("%w: chunk %v [%d, +%d) out of place", ErrProtocol, s.ranges[index].Blob, offset, n)
		}
		p.off += uint64(n)
		if p.off == p.end {
			cur++
			for cur < len(ps) && ps[cur].off == ps[cur].end {
				cur++
			}
		}
		return f.dst[blob][offset : offset+uint64(n)], nil
	}
	for {
		err := s.cs.RecvMsg(&m)
		if m.err != nil {
			// gRPC wraps codec errors in a status: report ours.
			return fail(m.err)
		}
		if errors.Is(err, io.EOF) {
			if cur != len(ps) {
				return fail(fmt.Errorf("%w: stream ended before all bytes arrived", ErrProtocol))
			}
			return nil
		}
		if err != nil {
			return fail(err)
		}
		s.watch.Reset(f.c.cfg.IdleTimeout)
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
	}
}

// receiveRaw reads the pieces of a stream from a raw data connection
// straight into the destination, then expects the stream's status.
func (f *fetch) receiveRaw(ctx context.Context, s *stream, ps []piece) error {
	idle := f.c.cfg.IdleTimeout
	dctx, cancelDial := context.WithTimeout(ctx, idle)
	var conn net.Conn
	var err error
	if f.c.cfg.Dialer != nil {
		conn, err = f.c.cfg.Dialer(dctx, f.endpoint)
	} else {
		conn, err = (&net.Dialer{}).DialContext(dctx, "tcp", f.endpoint)
	}
	cancelDial()
	if err != nil {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return fmt.Errorf("%w: data connection: %w", ErrUnavailable, err)
	}
	defer func() { _ = conn.Close() }()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	hello := make([]byte, 0, len(rawMagic)+ticketLen)
	hello = append(append(hello, rawMagic...), s.hdr.Ticket...)
	_ = conn.SetWriteDeadline(time.Now().Add(idle))
	if _, err := conn.Write(hello); err != nil {
		return rawErr(ctx, err, idle)
	}
	for _, p := range ps {
		b := f.dst[f.index(s.ranges[p.blob].Blob)][p.off:p.end]
		for len(b) > 0 {
			n := min(len(b), rawStep)
			_ = conn.SetReadDeadline(time.Now().Add(idle))
			if _, err := io.ReadFull(conn, b[:n]); err != nil {
				return rawErr(ctx, err, idle)
			}
			s.watch.Reset(idle)
			b = b[n:]
		}
	}
	var m inChunk
	m.dest = func(uint32, uint64, int) ([]byte, error) {
		return nil, fmt.Errorf("%w: chunk on a raw stream", ErrProtocol)
	}
	err = s.cs.RecvMsg(&m)
	switch {
	case m.err != nil:
		return m.err
	case err == nil:
		return fmt.Errorf("%w: message after the raw bytes", ErrProtocol)
	case errors.Is(err, io.EOF):
		return nil
	}
	return err
}

// rawErr is the error of a failed read or write on a raw data connection.
func rawErr(ctx context.Context, err error, idle time.Duration) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return fmt.Errorf("%w: nothing received for %v", ErrStalled, idle)
	}
	return fmt.Errorf("%w: data connection: %w", ErrUnavailable, err)
}

// nopTransfer stands in for a Transfer that must not be touched again.
type nopTransfer struct{}

// Alloc fails: the transfer ended.
func (nopTransfer) Alloc(ids.ObjectID, uint64) ([]byte, error) { return nil, ErrClosed }

// Commit fails: the transfer ended.
func (nopTransfer) Commit() ([]LocalBlob, error) { return nil, ErrClosed }

// Abort does nothing: the transfer ended.
func (nopTransfer) Abort() {}
