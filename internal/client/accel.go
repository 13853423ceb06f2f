package client

import (
	"os"
	"strings"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/status"
)

// Accelerators. The plain protocol (one request, one reply, in the dialect
// chosen at Connect) is the specification of every operation: what a get,
// a put or a create returns and which references it takes. An accelerator
// makes some operation cheaper: it answers a get from shared memory, carves
// buffers from memory leased ahead, or writes a put without awaiting its
// reply. Each one either does the whole operation, with the plain path's
// result and references, or declines without changing anything, and then
// the next accelerator, at last the plain path, runs. So each can be
// turned off (WithAccel, AccelEnv) and the client stays correct: the test
// suite runs with each one off (make test-accel-off).
//
// The accelerators a client uses are chosen once, at Connect, from what
// the caller allows and what the daemon offers; a client over TCP, or of
// upstream's daemon, has none. Client.accels lists them in the order they
// are asked; it is written before Connect returns and read without a lock.

// Accel is a set of accelerators.
type Accel uint32

// The accelerators. Some need others: pipelined puts carve from the lease
// and count in the directory's pin page, and gets of one's own puts answer
// for pipelined puts, so turning one off turns off those that need it.
const (
	// AccelDirectory: gets of published objects from the daemon's
	// directory, pinned in this connection's pin page (directory.go).
	AccelDirectory Accel = 1 << iota
	// AccelLease: buffers carved from memory and ids the daemon leased
	// to the connection, named to it with the next request (lease.go).
	AccelLease
	// AccelPipelined: small puts written without awaiting the reply
	// (pipelined.go). Needs AccelLease and AccelDirectory.
	AccelPipelined
	// AccelOwnPut: gets of this client's pipelined puts answered from the
	// put before the daemon handled it (ownput.go). Needs AccelPipelined.
	AccelOwnPut

	// AccelAll is every accelerator: the default.
	AccelAll = AccelDirectory | AccelLease | AccelPipelined | AccelOwnPut
	// AccelNone is the plain protocol alone.
	AccelNone Accel = 0
)

// AccelEnv names the environment variable Connect reads to change the
// accelerators allowed (after WithAccel): a comma-separated list of
// accelerator names, each turned off with a leading '-' and on without
// one or with '+'; "all" and "none" set the whole set. Names: directory,
// lease, pipelined, ownput. Example: V6D_ACCEL=-directory,-lease. A value
// it cannot read makes Connect fail with Invalid.
const AccelEnv = "V6D_ACCEL"

var accelNames = [...]struct {
	name string
	a    Accel
}{{"directory", AccelDirectory}, {"lease", AccelLease}, {"pipelined", AccelPipelined}, {"ownput", AccelOwnPut}}

// ParseAccel applies spec (AccelEnv's syntax) to from and returns the
// result; an unknown name is Invalid.
func ParseAccel(from Accel, spec string) (Accel, error) {
	a := from
	for _, item := range strings.Split(spec, ",") {
		item = strings.TrimSpace(item)
		if item == "" {
			continue
		}
		off := strings.HasPrefix(item, "-")
		name := strings.TrimLeft(item, "+-")
		var set Accel
		switch name {
		case "all":
			set = AccelAll
		case "none":
			set, off = AccelAll, !off
		default:
			for _, n := range accelNames {
				if n.name == name {
					set = n.a
				}
			}
		}
		if set == 0 {
			return from, status.Errorf(status.Invalid,
				"unknown accelerator %q in %q (known: directory, lease, pipelined, ownput, all, none)", name, spec)
		}
		if off {
			a &^= set
		} else {
			a |= set
		}
	}
	return a, nil
}

// String lists the accelerators of a by name ("none" for none).
func (a Accel) String() string {
	var names []string
	for _, n := range accelNames {
		if a&n.a != 0 {
			names = append(names, n.name)
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ",")
}

// closure returns a without the accelerators whose needs a lacks.
func (a Accel) closure() Accel {
	if a&(AccelLease|AccelDirectory) != AccelLease|AccelDirectory {
		a &^= AccelPipelined
	}
	if a&AccelPipelined == 0 {
		a &^= AccelOwnPut
	}
	return a
}

// WithAccel sets the accelerators Connect may use (AccelAll unless given);
// AccelEnv, when set, changes the set further. ConnectRPC uses none.
func WithAccel(a Accel) Option {
	return func(o *options) { o.accel, o.accelSet = a, true }
}

// accelOptions returns the accelerators o allows, after AccelEnv and the
// older NoDirectoryEnv.
func accelOptions(o *options) (Accel, error) {
	a := AccelAll
	if o.accelSet {
		a = o.accel
	}
	if o.noDirectory || os.Getenv(NoDirectoryEnv) != "" {
		a &^= AccelDirectory
	}
	if spec, ok := os.LookupEnv(AccelEnv); ok {
		var err error
		if a, err = ParseAccel(a, spec); err != nil {
			return 0, status.Errorf(status.Invalid, "%s: %s", AccelEnv, status.AsError(err).Message)
		}
	}
	return a.closure(), nil
}

// accelList is the accelerators of a client, in the order they are asked.
type accelList []accelerator

// startAccels sets up the accelerators of want that the daemon offers.
// Connect calls it once registered, before the client is shared.
func startAccels(c *Client, want Accel) {
	var dir *directory
	var lease *leaser
	if want&AccelDirectory != 0 && c.state.dir != nil {
		dir = &directory{c: c}
		c.accels = append(c.accels, dir)
		c.accelOn |= AccelDirectory
	}
	var own *ownPuts
	if want&AccelOwnPut != 0 && dir != nil && c.ext.pipelined && c.ext.lease {
		own = &ownPuts{c: c, dir: dir}
		c.accels = append(c.accels, own)
		c.accelOn |= AccelOwnPut
	}
	if want&AccelLease != 0 && c.ext.lease {
		lease = &leaser{c: c}
		c.accels = append(c.accels, lease)
		c.accelOn |= AccelLease
	}
	if want&AccelPipelined != 0 && lease != nil && dir != nil && c.ext.pipelined {
		c.accels = append(c.accels, &pipeline{c: c, lease: lease, own: own})
		c.accelOn |= AccelPipelined
	}
}

// get asks the accelerators for a get of id (accelerator.get). c.state
// must be held.
func (l accelList) get(id ids.ObjectID, pin bool) ([]byte, []ids.ObjectID, bool) {
	for _, a := range l {
		if tree, bids, ok := a.get(id, pin); ok {
			return tree, bids, true
		}
	}
	return nil, nil, false
}

// buffers asks the accelerators to create buffers of sizes
// (accelerator.buffers). c.mu must be held.
func (l accelList) buffers(sizes []uint64) ([]Buffer, bool, error) {
	for _, a := range l {
		if bufs, ok, err := a.buffers(sizes); ok || err != nil {
			return bufs, ok, err
		}
	}
	return nil, false, nil
}

// settle lets the accelerators finish what a get may ask for
// (accelerator.settle) and reports whether one waited. No lock held.
func (l accelList) settle() bool {
	for _, a := range l {
		if a.settle() {
			return true
		}
	}
	return false
}

// Accelerators returns the accelerators the client uses: those allowed at
// Connect that the daemon offered.
func (c *Client) Accelerators() Accel { return c.accelOn }

// accelerator is one fast path. Each method does its operation completely,
// with the result and the references the plain path would give, and
// reports done; or it declines (done false, nothing changed), and the next
// accelerator of Client.accels, at last the plain path, runs. Errors are
// the operation's: an accelerator that fails did the operation's work so
// far and reports done. plain declines everything; an accelerator embeds
// it and overrides what it answers. Interface calls with arguments that
// the caller's heap owns already, so a call allocates nothing.
type accelerator interface {
	// get answers a get of id: its tree (valid while c.state is held and
	// no other get runs; the caller copies what it keeps) and, with pin,
	// the blobs of the tree, each counted once as a get with buffers
	// counts them. c.state is held.
	get(id ids.ObjectID, pin bool) (tree []byte, bids []ids.ObjectID, done bool)
	// settle waits until what the accelerator has in flight that a get
	// may ask for is visible to get, and reports whether it waited (a get
	// that missed is worth asking again). No lock is held.
	settle() bool
	// buffers creates unsealed blobs of sizes (none 0), as create_buffers
	// does. c.mu is held.
	buffers(sizes []uint64) ([]Buffer, bool, error)
	// put is CreateInline of tree (not empty) and data. c.mu is held and
	// usableLocked was checked.
	put(tree []byte, data [][]byte) (ids.ObjectID, []ids.ObjectID, bool, error)
	// ahead readies req for the daemon and returns a request to write
	// before it (nil: none). It runs for every request. c.mu is held.
	ahead(req protocol.Request) protocol.Request
	// created takes what a create_data reply carries for the
	// accelerator. c.mu is held.
	created(req *protocol.CreateDataRequest, reply *protocol.CreateDataReply)
	// giveBack returns what the accelerator holds of the daemon's that
	// the daemon would keep for it until the connection closes (a lease).
	// c.mu is held.
	giveBack() error
}

// plain is the plain protocol: it declines every operation.
type plain struct{}

func (plain) get(ids.ObjectID, bool) ([]byte, []ids.ObjectID, bool) { return nil, nil, false }
func (plain) settle() bool                                          { return false }
func (plain) buffers([]uint64) ([]Buffer, bool, error)              { return nil, false, nil }
func (plain) put([]byte, [][]byte) (ids.ObjectID, []ids.ObjectID, bool, error) {
	return 0, nil, false, nil
}
func (plain) ahead(protocol.Request) protocol.Request                        { return nil }
func (plain) created(*protocol.CreateDataRequest, *protocol.CreateDataReply) {}
func (plain) giveBack() error                                                { return nil }

var _ accelerator = plain{}
