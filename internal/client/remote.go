package client

import (
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/status"
)

// Remote mode (docs/cluster-rpc.md): a Client connected to a daemon's TCP
// listener (ConnectRPC) has the same API, but nothing is shared: the bytes of
// blobs travel on the connection, and every view the client hands out lies
// in memory of its own, an anonymous mapping per blob (never Go memory, so
// C callers may hold it; writable, since nobody else sees it).
//
//   - CreateBuffer(s) asks the daemon for the blobs as over IPC and gives
//     the caller local memory to write; Seal and CreateMetadata first send
//     those bytes (fill_buffers_request), then seal as over IPC.
//   - GetBuffers asks get_remote_buffers_request, GetObject get_data with
//     buffers: the bytes follow the reply and are copied into local memory.
//     The daemon takes the same references as over IPC; Release drops them,
//     and frees the local copy when the last goes.
//   - CreateRemoteBuffers is upstream's one-round-trip upload of sealed blobs.
//
// The references and the lifetime rules are those of IPC mode; only the
// address of the bytes differs. Things that need shared memory (MapPrivate)
// are refused.

// RPCEndpointEnv is the environment variable ConnectRPC reads when given no
// endpoint (upstream's).
const RPCEndpointEnv = "VINEYARD_RPC_ENDPOINT"

// RPCSecretEnv is the environment variable ConnectRPC takes the secret from
// when WithSecret is not given.
const RPCSecretEnv = "VINEYARD_RPC_SECRET"

// bulkChunk is the most bytes one read of blob bytes asks the socket for.
const bulkChunk = 8 << 20

// WithSecret sets the shared secret ConnectRPC presents (register_request's
// password); a daemon that requires one refuses a client without it.
func WithSecret(secret string) Option {
	return func(o *options) { o.secret, o.secretSet = secret, true }
}

// ConnectRPC dials a daemon's TCP listener at endpoint ("host:port"; a list
// "h1:p1,h2:p2" is tried in order; RPCEndpointEnv when ""), registers
// (with WithSecret's secret, else RPCSecretEnv's) and returns a client in
// remote mode. Errors are those of Connect; a refused secret is
// ConnectionFailed. The caller MUST Close the client.
func ConnectRPC(endpoint string, opts ...Option) (*Client, error) {
	o := options{timeout: DefaultTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	if err := checkTimeout(o.timeout); err != nil {
		return nil, err
	}
	if endpoint == "" {
		endpoint = os.Getenv(RPCEndpointEnv)
		if endpoint == "" {
			return nil, status.Errorf(status.ConnectionFailed, "no endpoint given and %s is not set", RPCEndpointEnv)
		}
	}
	if !o.secretSet {
		o.secret = os.Getenv(RPCSecretEnv)
	}
	var errs []error
	for _, ep := range strings.Split(endpoint, ",") {
		c, err := connectRPC(strings.TrimSpace(ep), o)
		if err == nil {
			return c, nil
		}
		errs = append(errs, err)
	}
	if len(errs) == 1 {
		return nil, errs[0]
	}
	return nil, status.Errorf(status.ConnectionFailed, "no endpoint of %q answered: %v", endpoint, errors.Join(errs...))
}

func connectRPC(endpoint string, o options) (*Client, error) {
	conn, err := protocol.DialTCP(endpoint, o.timeout)
	if errors.Is(err, protocol.ErrTimeout) {
		return nil, status.Errorf(status.ConnectionFailed,
			"cannot connect to vineyardd at %s: no answer within %v", endpoint, o.timeout)
	}
	if err != nil {
		return nil, status.Errorf(status.ConnectionFailed, "cannot connect to vineyardd at %s: %v", endpoint, unwrapOp(err))
	}
	c := newClient(conn, endpoint)
	c.w.noFds = true
	c.timeout.Store(int64(o.timeout))
	var reply protocol.RegisterReply
	req := &protocol.RegisterRequest{Version: Version, Extensions: protocol.Extensions, Password: o.secret}
	if err := c.call(req, &reply); err != nil {
		_ = conn.Close()
		return nil, status.Errorf(status.ConnectionFailed, "cannot register with vineyardd at %s: %v", endpoint, err)
	}
	c.instanceID = reply.InstanceID
	c.daemonVersion = reply.Version
	c.ext = parseExtensions(reply.Extensions) // no meta epoch: nothing is mapped
	c.d = dialectFor(c, true)
	return c, nil
}

// IsRPC reports whether the client is in remote mode (ConnectRPC).
func (c *Client) IsRPC() bool {
	_, ok := c.d.(remote)
	return ok
}

// create sends the bytes of toSeal, then creates as the base dialect does.
func (r remote) create(tree []byte, toSeal []ids.ObjectID, withTree bool) (ids.ObjectID, json.RawMessage, error) {
	if err := r.fillLocked(toSeal); err != nil {
		return 0, nil, err
	}
	return r.base.create(tree, toSeal, withTree)
}

// putInline is the base dialect's: the bytes travel with the request.
func (r remote) putInline(tree []byte, data [][]byte, sizes []uint64) (ids.ObjectID, []ids.ObjectID, error) {
	return r.base.putInline(tree, data, sizes)
}

// seal sends the blob's bytes, then seals it.
func (r remote) seal(id ids.ObjectID) error {
	if err := r.fillLocked([]ids.ObjectID{id}); err != nil {
		return err
	}
	return r.ours.seal(id)
}

// errNeedsShm is the error of calls that only make sense with shared memory.
func errNeedsShm(what string) error {
	return status.Errorf(status.Invalid,
		"%s needs shared memory, and this client is connected over TCP (RPC): its blobs are private copies already", what)
}

// errUpstreamRemote is the error of remote calls that need this daemon's
// extensions, against upstream's vineyardd over TCP.
func errUpstreamRemote(what string) error {
	return status.Errorf(status.NotImplemented,
		"%s over TCP needs this project's vineyardd; against upstream's, use CreateRemoteBuffers and GetBuffers", what)
}

// localMem is memory of this process holding a remote blob's bytes: an
// anonymous mapping, outside the Go heap.
type localMem struct {
	b []byte // the bytes handed out: the first size bytes of m
	m []byte // the whole mapping
}

// memPool keeps mappings freed recently, for the next copies to reuse:
// fresh memory costs a page fault per page (15-30 us per 4 KiB on the
// virtual machines measured), more than copying into it. Up to poolMax bytes
// are kept, and all of them are unmapped once poolIdle passes without a
// reuse, so an idle client gives the memory back. A reused mapping is not
// zeroed (a copy overwrites it; a created buffer, as an arena's, holds
// whatever was there).
var memPool struct {
	sync.Mutex
	free  [][]byte
	bytes int
	used  bool // a mapping was taken since the trim timer was armed
	armed bool
}

const (
	poolMax  = 1 << 30
	poolIdle = 5 * time.Second
)

// trimPool unmaps the pool unless it was used since the last call.
func trimPool() {
	memPool.Lock()
	if memPool.used {
		memPool.used = false
		time.AfterFunc(poolIdle, trimPool)
		memPool.Unlock()
		return
	}
	free := memPool.free
	memPool.free, memPool.bytes, memPool.armed = nil, 0, false
	memPool.Unlock()
	for _, m := range free {
		_ = unix.Munmap(m)
	}
}

// newLocalMem returns size (> 0) bytes: a pooled mapping of at least size
// and at most twice that, else a new one, populated at once.
func newLocalMem(size uint64) (*localMem, error) {
	if size > uint64(^uint(0)>>1) {
		return nil, status.Errorf(status.NotEnoughMemory, "cannot map %d bytes", size)
	}
	n := int(size)
	memPool.Lock()
	best := -1
	for i, m := range memPool.free {
		if len(m) >= n && len(m) <= 2*n && (best < 0 || len(m) < len(memPool.free[best])) {
			best = i
		}
	}
	if best >= 0 {
		m := memPool.free[best]
		memPool.free = append(memPool.free[:best], memPool.free[best+1:]...)
		memPool.bytes -= len(m)
		memPool.used = true
		memPool.Unlock()
		return &localMem{b: m[:n:n], m: m}, nil
	}
	memPool.Unlock()
	m, err := unix.Mmap(-1, 0, n, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS|unix.MAP_POPULATE)
	if err != nil {
		return nil, status.Errorf(status.NotEnoughMemory, "cannot map %d bytes for a blob's copy: %v", size, err)
	}
	return &localMem{b: m[:n:n], m: m}, nil
}

// free gives the memory back (to the pool, or unmapped); views of it must no
// longer be used. Safe on nil and twice.
func (m *localMem) free() {
	if m == nil || m.m == nil {
		return
	}
	mapping := m.m
	m.b, m.m = nil, nil
	memPool.Lock()
	if memPool.bytes+len(mapping) <= poolMax {
		memPool.free = append(memPool.free, mapping)
		memPool.bytes += len(mapping)
		if !memPool.armed {
			memPool.armed = true
			time.AfterFunc(poolIdle, trimPool)
		}
		memPool.Unlock()
		return
	}
	memPool.Unlock()
	_ = unix.Munmap(mapping)
}

// drop frees what the entry owns in this process, once it leaves the
// client's table.
func (b *blob) drop() {
	b.mem.free()
	b.mem = nil
}

// adopt is adopt in remote mode: local memory for
// each created blob. c.mu must be held.
func (r remote) adopt(ps []protocol.Payload) ([]Buffer, error) {
	c := r.c
	out := make([]Buffer, len(ps))
	entries := make([]*blob, len(ps))
	fail := func(err error) ([]Buffer, error) {
		for _, b := range entries {
			if b != nil {
				b.drop()
			}
		}
		return nil, err
	}
	for i := range ps {
		p := &ps[i]
		if !p.ObjectID.IsBlob() {
			return fail(errBadReply("created id %v is not a blob id", p.ObjectID))
		}
		m, err := newLocalMem(p.DataSize)
		if err != nil {
			return fail(err)
		}
		out[i] = Buffer{ID: p.ObjectID, Data: m.b}
		entries[i] = &blob{ro: m.b, rw: m.b, owned: true, mem: m}
	}
	c.state.Lock()
	for i, b := range entries {
		c.state.blobs[out[i].ID] = b
	}
	c.state.Unlock()
	return out, nil
}

// fillLocked sends the bytes of the unsealed blobs idl this client created
// (those it has local memory for) to the daemon, in one round trip, before
// they are sealed. c.mu must be held.
func (r remote) fillLocked(idl []ids.ObjectID) error {
	c := r.c
	req := &protocol.FillBuffersRequest{}
	var data [][]byte
	c.state.Lock()
	for _, id := range idl {
		if b, ok := c.state.blobs[id]; ok && b.owned && len(b.rw) > 0 {
			req.IDs = append(req.IDs, id)
			req.Sizes = append(req.Sizes, uint64(len(b.rw)))
			data = append(data, b.rw)
		}
	}
	c.state.Unlock()
	if len(req.IDs) == 0 {
		return nil
	}
	if !c.ext.seal {
		return errUpstreamRemote("filling created buffers")
	}
	var reply protocol.AckReply
	return c.callLocked(req, &reply, data...)
}

// readBytes reads the bytes of ps, which follow a reply, into local
// memory: one copy per payload, nil for an empty one; those read ahead
// with the reply first (the exchange had bytesFollow set), then straight
// from the socket. On error the connection is lost (the stream is out of
// step). c.mu must be held.
func (w *wire) readBytes(ps []protocol.Payload) ([]*localMem, error) {
	w.bytesFollow = false
	out := make([]*localMem, len(ps))
	fail := func(err error) ([]*localMem, error) {
		for _, m := range out {
			m.free()
		}
		return nil, w.lose(err)
	}
	for i := range ps {
		if ps[i].DataSize == 0 {
			continue
		}
		m, err := newLocalMem(ps[i].DataSize)
		if err != nil {
			return fail(err)
		}
		out[i] = m
		dst := m.b
		if w.apos < w.aend {
			k := copy(dst, w.ahead[w.apos:w.aend])
			w.apos += k
			dst = dst[k:]
		}
		for len(dst) > 0 {
			n := min(len(dst), bulkChunk)
			if _, err := io.ReadFull(w.conn, dst[:n]); err != nil {
				return fail(err)
			}
			dst = dst[n:]
		}
	}
	if w.apos != w.aend {
		return fail(errBadReply("%d bytes came after the blobs", w.aend-w.apos))
	}
	return out, nil
}

// pinRemoteLocked records a copy got for blob id and adds one reference, as
// pinLocked does; when the client has a copy already, the new one is freed.
// c.state must be held.
func (r remote) pinRemoteLocked(id ids.ObjectID, m *localMem) {
	c := r.c
	b, ok := c.state.blobs[id]
	if !ok {
		b = &blob{}
		c.state.blobs[id] = b
	}
	if b.ro == nil && m != nil {
		b.ro, b.mem = m.b, m
	} else {
		m.free()
	}
	b.pins++
}

// getBuffers is GetBuffers in remote mode, for the blobs want (distinct, not
// empty): get_remote_buffers_request, the bytes after the reply.
func (r remote) getBuffers(idl, want []ids.ObjectID, unsafe bool, out [][]byte) error {
	c := r.c
	c.mu.Lock()
	defer c.mu.Unlock()
	var reply protocol.BuffersReply
	req := &protocol.GetRemoteBuffersRequest{GetBuffersRequest: protocol.GetBuffersRequest{IDs: want, Unsafe: unsafe}}
	c.w.bytesFollow = true
	if err := c.callLocked(req, &reply); err != nil {
		c.w.bytesFollow = false
		return err
	}
	mems, err := c.w.readBytes(reply.Payloads)
	if err != nil {
		return err
	}
	got := make(map[ids.ObjectID]*localMem, len(mems))
	for i, p := range reply.Payloads {
		got[p.ObjectID] = mems[i]
	}
	for _, id := range want {
		if _, ok := got[id]; !ok {
			for _, m := range mems {
				m.free()
			}
			return status.Errorf(status.ObjectNotExists, "blob %v was not returned", id)
		}
	}
	c.state.Lock()
	defer c.state.Unlock()
	for _, id := range want {
		r.pinRemoteLocked(id, got[id])
		got[id] = nil // the entry owns it now
	}
	for i, id := range idl {
		if id == ids.EmptyBlob {
			continue
		}
		if b := c.state.blobs[id]; b != nil {
			if out[i] = b.ro; !containsID(want, id) || firstIndex(idl, id) != i {
				b.pins++ // a repeated id counts one reference per entry
			}
		}
	}
	return nil
}

func containsID(l []ids.ObjectID, id ids.ObjectID) bool { return firstIndex(l, id) >= 0 }

func firstIndex(l []ids.ObjectID, id ids.ObjectID) int {
	for i, x := range l {
		if x == id {
			return i
		}
	}
	return -1
}

// getObject is GetObject in remote mode (getTree; no shape number: the
// trees are copies the client keeps, not the daemon's records).
func (r remote) getObject(id ids.ObjectID) (json.RawMessage, uint64, error) {
	tree, err := r.getTree(id)
	return tree, 0, err
}

// getTree is GetObject in remote mode: get_data with buffers, whose reply
// the blobs' bytes follow.
func (r remote) getTree(id ids.ObjectID) (json.RawMessage, error) {
	c := r.c
	if !c.ext.withBuffers {
		return nil, errUpstreamRemote("getting an object with its blobs")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	var reply protocol.GetDataReply
	req := &protocol.GetDataRequest{ID: protocol.IDList{id}, WithBuffers: true}
	c.w.bytesFollow = true
	if err := c.callLocked(req, &reply); err != nil {
		c.w.bytesFollow = false
		return nil, err
	}
	mems, err := c.w.readBytes(reply.Payloads)
	if err != nil {
		return nil, err
	}
	tree, err := treeOf(&reply, id)
	if err != nil {
		for _, m := range mems {
			m.free()
		}
		return nil, err
	}
	c.state.Lock()
	defer c.state.Unlock()
	pinned := make([]ids.ObjectID, 0, len(mems))
	seen := make(map[ids.ObjectID]bool, len(mems))
	for i, p := range reply.Payloads {
		bid := p.ObjectID
		if bid == ids.EmptyBlob || seen[bid] {
			mems[i].free()
			continue
		}
		seen[bid] = true
		r.pinRemoteLocked(bid, mems[i])
		pinned = append(pinned, bid)
	}
	if !id.IsBlob() {
		c.state.objects[id] = append(c.state.objects[id], pinned)
	}
	return tree, nil
}

// CreateRemoteBuffers uploads data as new sealed blobs in one round trip
// (upstream's create_remote_buffers_request): the bytes are written to the
// connection straight from data, which the caller keeps. The client holds
// no reference to the blobs. It works over IPC too.
func (c *Client) CreateRemoteBuffers(data [][]byte) ([]ids.ObjectID, error) {
	sizes := make([]uint64, len(data))
	for i, d := range data {
		sizes[i] = uint64(len(d))
	}
	var reply protocol.BuffersReply
	req := &protocol.CreateRemoteBuffersRequest{Num: len(sizes), Sizes: sizes}
	if err := c.call(req, &reply, data...); err != nil {
		return nil, err
	}
	if len(reply.IDs) != len(data) {
		return nil, errBadReply("%d ids for %d remote buffers", len(reply.IDs), len(data))
	}
	return reply.IDs, nil
}
