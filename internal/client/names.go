package client

import (
	"encoding/json"
	"time"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/status"
)

// PutName associates name with a persisted object; an existing name moves. A
// transient object is Invalid, a blob Invalid, a missing one ObjectNotExists.
func (c *Client) PutName(id ids.ObjectID, name string) error {
	var reply protocol.AckReply
	return c.call(&protocol.PutNameRequest{ObjectID: id, Name: name}, &reply)
}

// GetName resolves a name. Without wait a missing name is ObjectNotExists.
// With wait the daemon answers once the name appears, or after timeout (a
// negative timeout waits without limit) with a Timeout error; the client
// stays usable. A timeout above MaxTimeout is Invalid. The client's own
// timeout (SetTimeout) is stretched by the wait for this call, so a stopped
// daemon is still caught (except when the wait has no limit). While it
// waits, other exchanges of this client wait too (the protocol is strictly
// request/reply): callers that must stay responsive wait in short slices.
func (c *Client) GetName(name string, wait bool, timeout time.Duration) (ids.ObjectID, error) {
	req := &protocol.GetNameRequest{Name: name, Wait: wait}
	var stretch time.Duration
	if wait {
		if timeout > MaxTimeout {
			return 0, status.Errorf(status.Invalid,
				"wait timeout %v out of range: at most %v, or negative for no limit", timeout, MaxTimeout)
		}
		stretch = -1
		if timeout >= 0 {
			ms := timeout.Milliseconds()
			req.TimeoutMs = &ms
			stretch = timeout
		}
	}
	var reply protocol.GetNameReply
	if stretch == 0 {
		if err := c.call(req, &reply); err != nil {
			return 0, err
		}
		return reply.ObjectID, nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.callStretchedLocked(req, &reply, stretch); err != nil {
		return 0, err
	}
	return reply.ObjectID, nil
}

// callStretchedLocked is callLocked for a request the daemon may hold for
// up to stretch before it replies (negative: without limit): the socket's
// timeout is stretched by it for this exchange only, so the client's
// timeout still catches a daemon that stopped; a negative stretch lifts
// the timeout for the exchange. c.mu must be held.
func (c *Client) callStretchedLocked(req protocol.Request, reply protocol.Reply, stretch time.Duration) error {
	if err := c.usableLocked(); err != nil {
		return err
	}
	base := c.Timeout()
	stretched := time.Duration(0) // no limit
	if stretch >= 0 {
		stretched = base + min(stretch, MaxTimeout) // both at most MaxTimeout: no overflow
	}
	if err := c.w.conn.SetTimeout(stretched); err != nil {
		return c.w.lose(err)
	}
	err := c.callLocked(req, reply)
	if e := c.w.conn.SetTimeout(base); e != nil {
		return c.w.lose(e)
	}
	return err
}

// DropName removes a name; an unknown name is not an error.
func (c *Client) DropName(name string) error {
	var reply protocol.AckReply
	return c.call(&protocol.DropNameRequest{Name: name}, &reply)
}

// ListNames returns the names matching pattern (a glob, or a full-match
// regular expression when regex is set), at most limit of them (0: all).
func (c *Client) ListNames(pattern string, regex bool, limit uint64) (map[string]ids.ObjectID, error) {
	var reply protocol.ListNameReply
	req := &protocol.ListNameRequest{Pattern: pattern, Regex: regex, Limit: limit}
	if err := c.call(req, &reply); err != nil {
		return nil, err
	}
	if reply.Names == nil {
		reply.Names = map[string]ids.ObjectID{}
	}
	return reply.Names, nil
}

// Clear deletes every object the daemon holds (force, deep) and trims memory.
// Blobs clients still hold stay readable for them until released.
func (c *Client) Clear() error {
	var reply protocol.AckReply
	return c.call(&protocol.ClearRequest{}, &reply)
}

// MemoryTrim returns unused arena pages to the kernel and reports whether
// anything was released.
func (c *Client) MemoryTrim() (bool, error) {
	var reply protocol.MemoryTrimReply
	if err := c.call(&protocol.MemoryTrimRequest{}, &reply); err != nil {
		return false, err
	}
	return reply.Trimmed, nil
}

// InstanceStatus returns the daemon's status: memory used and limit,
// connections, deferred requests.
func (c *Client) InstanceStatus() (protocol.InstanceStatus, error) {
	var reply protocol.InstanceStatusReply
	if err := c.call(&protocol.InstanceStatusRequest{}, &reply); err != nil {
		return protocol.InstanceStatus{}, err
	}
	return reply.Meta, nil
}

// ClusterMeta returns the instances of the cluster as a JSON object
// {"i<N>": {...}}.
func (c *Client) ClusterMeta() (json.RawMessage, error) {
	var reply protocol.ClusterMetaReply
	if err := c.call(&protocol.ClusterMetaRequest{}, &reply); err != nil {
		return nil, err
	}
	if len(reply.Meta) == 0 || string(reply.Meta) == "null" {
		return json.RawMessage("{}"), nil
	}
	return reply.Meta, nil
}

// Evict spills the blobs of the objects idl that no client holds now to the
// daemon's spill directory (the others stay); it fails when the daemon
// does not spill (no --spill-path).
func (c *Client) Evict(idl []ids.ObjectID) error {
	return c.call(&protocol.EvictRequest{IDs: idl}, &protocol.AckReply{})
}

// Load loads the spilled blobs of the objects idl back into memory; with
// pin, this connection also holds them, so that none spills, until Unpin
// (or the client closes).
func (c *Client) Load(idl []ids.ObjectID, pin bool) error {
	return c.call(&protocol.LoadRequest{IDs: idl, Pin: pin}, &protocol.AckReply{})
}

// Unpin drops what Load with pin held of the objects idl.
func (c *Client) Unpin(idl []ids.ObjectID) error {
	return c.call(&protocol.UnpinRequest{IDs: idl}, &protocol.AckReply{})
}
