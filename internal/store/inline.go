package store

import (
	"encoding/json"
	"strconv"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/status"
)

// Inline creation: a put of small data in one round trip. The client sends
// the bytes of new blobs after its create_data request; the daemon allocates
// the blobs, fills them from the socket, and creates them and the object
// together. In the tree, a member {"inline": i} stands for the i-th new
// blob.

// InlineBlob is a blob being filled for an inline create: Data is its memory
// in the arena, to be written by the caller (without holding any store lock;
// the blob is this session's and unsealed, so nothing else touches it).
type InlineBlob struct {
	ID   ids.ObjectID
	Data []byte
}

// AllocInline allocates blobs of the given sizes for an inline create; all or
// nothing. The caller fills them and then calls CreateInline, or
// DropInline if it cannot.
func (ss *Session) AllocInline(sizes []uint64) ([]InlineBlob, error) {
	ps, err := ss.CreateBuffers(sizes)
	if err != nil {
		return nil, err
	}
	arena := ss.s.arena.Bytes()
	out := make([]InlineBlob, len(ps))
	for i, p := range ps {
		out[i].ID = p.ID
		if p.Size > 0 {
			out[i].Data = arena[p.Offset : p.Offset+p.Size : p.Offset+p.Size]
		}
	}
	return out, nil
}

// DropInline frees blobs AllocInline made, when the create cannot go on.
func (ss *Session) DropInline(blobs []InlineBlob) {
	for _, b := range blobs {
		if b.ID != ids.EmptyBlob {
			_ = ss.DropBuffer(b.ID)
		}
	}
}

// CreateInline seals the filled blobs and, unless content is empty, creates
// the object of content, whose {"inline": i} members are blobs[i]; all or
// nothing (on error the blobs are freed). The session keeps no reference to
// the new blobs: the client never saw them as its own.
func (ss *Session) CreateInline(content json.RawMessage, blobs []InlineBlob) (Created, error) {
	s := ss.s
	s.mu.Lock()
	defer s.mu.Unlock()
	inline := make([]ids.ObjectID, len(blobs))
	for i, b := range blobs {
		inline[i] = b.ID
	}
	return ss.createInlineLocked(content, inline, 0, nil)
}

// createInlineLocked is CreateInline of the session's unsealed blobs
// inline; the object gets the id root, or a fresh one when root is 0.
// onFail, if not nil, runs first when the create is refused (a pipelined
// put's, CreateLeased). s.mu must be held.
func (ss *Session) createInlineLocked(content json.RawMessage, inline []ids.ObjectID, root ids.ObjectID, onFail func()) (Created, error) {
	s := ss.s
	fail := func(err error) (Created, error) {
		if onFail != nil {
			onFail()
		}
		for _, id := range inline {
			if b, ok := ss.created[id]; ok {
				s.life.dropUnsealedLocked(b)
			} else if id != ids.EmptyBlob {
				s.deleteLocked([]ids.ObjectID{id}, DeleteOptions{})
			}
		}
		return Created{}, err
	}
	var out Created
	if len(content) > 0 && string(content) != "null" {
		objs, err := s.build.buildTreeLocked(content, inline, root, leasedSignature(root))
		if err != nil {
			return fail(err)
		}
		for _, id := range inline {
			if err := ss.sealMemberLocked(id); err != nil {
				return fail(err)
			}
		}
		o := s.build.insertAllLocked(objs)
		sig, _ := parseSignature(o)
		out = Created{ID: o.id, Signature: sig}
	} else {
		for _, id := range inline {
			if err := ss.sealLocked(id); err != nil {
				return fail(err)
			}
		}
	}
	for _, id := range inline {
		ss.releaseLocked(id)
	}
	out.Inline = inline
	return out, nil
}

// inlineMember resolves a member {"inline": i} (index is the raw i) against
// the blobs of an inline create: it returns i.
func inlineMember(key string, index json.RawMessage, inline []ids.ObjectID) (int, error) {
	i, err := strconv.Atoi(string(index)) // plain digits, as our clients write them
	if err != nil && json.Unmarshal(index, &i) != nil || i < 0 || i >= len(inline) {
		return 0, status.Errorf(status.MetaTreeInvalid, "member %q: no inline blob %s of %d", key, index, len(inline))
	}
	return i, nil
}
