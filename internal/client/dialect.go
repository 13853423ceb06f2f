package client

import (
	"encoding/json"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/protocol"
)

// Dialects. How the client says an operation to its daemon is chosen once,
// at Connect, from the transport and the extensions the daemon names:
//
//   - ours: our daemon over its UNIX socket, with every extension
//     (seal-on-create, inline puts, with_content, with_buffers): an
//     operation is one exchange, and the accelerators (accel.go) may
//     answer it with none;
//   - upstream: a daemon that lacks them, upstream's vineyardd
//     (compat.go): upstream's messages only, a put in several;
//   - remote: a daemon over TCP (remote.go): nothing is shared, blob bytes
//     travel on the connection and are copied into memory of the
//     process; the messages are those of ours or upstream's (base).
//
// The Client checks its arguments, takes its locks and counts its
// references in one place; the dialect makes the exchanges.
type dialect interface {
	// create creates the object of tree, sealing toSeal (distinct blobs
	// this client created) first, and with withTree returns the stored
	// tree. Each blob of toSeal then holds a reference, counted in
	// Client.state, as after Seal. c.mu is held.
	create(tree []byte, toSeal []ids.ObjectID, withTree bool) (ids.ObjectID, json.RawMessage, error)
	// getObject is GetObject's exchange: the tree, the daemon's shape
	// number of it when the reply has one (0: none), and a reference to
	// each of its blobs, counted. No lock is held.
	getObject(id ids.ObjectID) (json.RawMessage, uint64, error)
	// putInline is CreateInline after its checks (sizes of data, in
	// all at most MaxInline). No lock is held.
	putInline(tree []byte, data [][]byte, sizes []uint64) (ids.ObjectID, []ids.ObjectID, error)
	// getBuffers is GetBuffers' exchange for want (distinct, not the
	// empty blob), each entry of idl counting one reference; out gets the
	// views. No lock is held.
	getBuffers(idl, want []ids.ObjectID, unsafe bool, out [][]byte) error
	// adopt records blobs the daemon created for this client and
	// returns their writable views. c.mu is held.
	adopt(ps []protocol.Payload) ([]Buffer, error)
	// seal seals a blob this client created, taking a reference. c.mu
	// is held.
	seal(id ids.ObjectID) error
}

// dialectFor returns the dialect of c, registered with its daemon over a
// UNIX socket, or over TCP with tcp.
func dialectFor(c *Client, tcp bool) dialect {
	o := ours{c: c}
	var d dialect = o
	if !c.ext.ours() {
		d = upstream{o}
	}
	if tcp {
		d = remote{ours: o, base: d}
	}
	return d
}

// ours is the dialect of our daemon over its UNIX socket.
type ours struct{ c *Client }

// upstream is the dialect of upstream's daemon (compat.go): ours, but for
// what upstream lacks.
type upstream struct{ ours }

// remote is the dialect of a daemon over TCP (remote.go): the messages of
// base, the bytes copied.
type remote struct {
	ours
	base dialect
}

var (
	_ dialect = ours{}
	_ dialect = upstream{}
	_ dialect = remote{}
)
