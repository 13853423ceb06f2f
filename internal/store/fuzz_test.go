package store

import (
	"fmt"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// FuzzStoreOps drives the store with sequences of operations from several
// sessions, each operation decoded from a few bytes of the input, and
// checks the invariants after every step. At the end every session closes
// and a clear must leave the store empty.
func FuzzStoreOps(f *testing.F) {
	f.Add([]byte{0, 0, 10, 1, 0, 0, 10, 0, 0, 2, 1, 0, 4, 0, 0, 9, 1, 0})
	f.Add([]byte{0, 0, 200, 1, 0, 0, 10, 0, 0, 5, 1, 0, 6, 1, 0, 4, 1, 3, 7, 0, 0})
	f.Add([]byte{0, 0, 1, 0, 1, 2, 1, 0, 0, 1, 1, 1, 10, 0, 0, 10, 1, 1, 11, 2, 2, 4, 0, 1, 4, 1, 3, 13, 0, 0})
	f.Add([]byte{0, 0, 64, 8, 0, 0, 8, 0, 1, 1, 0, 0, 12, 0, 0, 0, 1, 0, 12, 1, 1, 9, 1, 0})
	f.Add([]byte{16, 0, 90, 17, 20, 0, 17, 20, 1, 1, 0, 0, 17, 8, 66, 16, 4, 200, 17, 9, 3, 9, 0, 0, 16, 1, 40})
	f.Fuzz(func(t *testing.T, prog []byte) {
		s, err := New(Config{Size: 1 << 16})
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = s.Close() }()
		fz := &storeFuzz{t: t, s: s}
		for i := range fz.sessions {
			fz.sessions[i] = s.NewSession()
		}
		for len(prog) >= 3 {
			op, a, b := prog[0], prog[1], prog[2]
			prog = prog[3:]
			desc := fz.step(op, a, b)
			if err := s.CheckInvariants(); err != nil {
				t.Fatalf("after %s: %v", desc, err)
			}
		}
		for _, ss := range fz.sessions {
			ss.Close()
		}
		s.Clear()
		if err := s.CheckInvariants(); err != nil {
			t.Fatalf("after the final clear: %v", err)
		}
		if used, _ := s.Usage(); used != 0 || len(s.objects) != 0 || len(s.blobs) != 0 || len(s.zombies) != 0 {
			t.Fatalf("after closing every session and a clear: used %d, %d objects, %d blobs, %d zombies",
				used, len(s.objects), len(s.blobs), len(s.zombies))
		}
	})
}

// storeFuzz is the state of one FuzzStoreOps run: three sessions and every id
// the run has seen (some long deleted).
type storeFuzz struct {
	t        *testing.T
	s        *Store
	sessions [3]*Session
	blobs    []ids.ObjectID
	objects  []ids.ObjectID
}

func (fz *storeFuzz) blob(i byte) ids.ObjectID {
	if len(fz.blobs) == 0 || i == 255 {
		return ids.EmptyBlob
	}
	return fz.blobs[int(i)%len(fz.blobs)]
}

func (fz *storeFuzz) object(i byte) ids.ObjectID {
	if len(fz.objects) == 0 {
		return fz.blob(i)
	}
	if i&1 == 1 {
		return fz.blob(i >> 1)
	}
	return fz.objects[int(i>>1)%len(fz.objects)]
}

// step runs one operation; errors from the store are expected (ops are
// random) and only the invariants judge the outcome.
func (fz *storeFuzz) step(op, a, b byte) string {
	s, ss := fz.s, fz.sessions[int(a)%len(fz.sessions)]
	switch op % 18 {
	case 0:
		p, err := ss.CreateBuffer(uint64(b) * 97 % 5000)
		if err == nil && p.ID != ids.EmptyBlob {
			fz.blobs = append(fz.blobs, p.ID)
		}
		return fmt.Sprintf("create %d: %v", uint64(b)*97%5000, err)
	case 1:
		return fmt.Sprintf("seal %v: %v", fz.blob(b), ss.Seal(fz.blob(b)))
	case 2:
		_, err := ss.GetBuffers([]ids.ObjectID{fz.blob(b), fz.blob(b / 2)}, b&1 == 1)
		return fmt.Sprintf("get %v: %v", fz.blob(b), err)
	case 3:
		return fmt.Sprintf("release %v: %v", fz.blob(b), ss.Release(fz.blob(b)))
	case 4:
		opt := DeleteOptions{Force: a&4 != 0, Deep: a&8 != 0, MemoryTrim: a&16 != 0}
		s.Delete([]ids.ObjectID{fz.object(b)}, opt)
		return fmt.Sprintf("delete %v %+v", fz.object(b), opt)
	case 5:
		return fmt.Sprintf("persist %v: %v", fz.object(b), s.Persist(fz.object(b)))
	case 6:
		name := fmt.Sprintf("n%d", a%4)
		return fmt.Sprintf("put name %s %v: %v", name, fz.object(b), s.PutName(name, fz.object(b)))
	case 7:
		_ = s.DropName(fmt.Sprintf("n%d", b%4))
		return fmt.Sprintf("drop name n%d", b%4)
	case 8:
		size := uint64(b) * 31 % 5000
		return fmt.Sprintf("shrink %v to %d: %v", fz.blob(a), size, ss.ShrinkBuffer(fz.blob(a), size))
	case 9:
		ss.Close()
		fz.sessions[int(a)%len(fz.sessions)] = s.NewSession()
		return "close session"
	case 10, 11:
		tree := fmt.Sprintf(`{"typename":"t%d","x":{"id":"%v"},"y":{"id":"%v"}}`, op, fz.object(a), fz.object(b))
		if op == 11 {
			tree = fmt.Sprintf(`{"typename":"n","x":{"typename":"m","b":{"id":"%v"}},"z":{"id":"%v"}}`, fz.blob(a), fz.blob(b))
		}
		c, err := ss.CreateData([]byte(tree), nil)
		if err == nil {
			fz.objects = append(fz.objects, c.ID)
		}
		return fmt.Sprintf("create data %s: %v", tree, err)
	case 12:
		return fmt.Sprintf("drop %v: %v", fz.blob(b), ss.DropBuffer(fz.blob(b)))
	case 13:
		if b%8 != 0 { // clear is rarer than the rest
			return "no clear"
		}
		s.Clear()
		return "clear"
	case 14:
		_, _, _, err := ss.GetDataWithBuffers([]ids.ObjectID{fz.object(a), fz.object(b), fz.object(a)})
		return fmt.Sprintf("get data %v %v: %v", fz.object(a), fz.object(b), err)
	case 16:
		want, need := uint64(b)*131%20000, uint64(0)
		if a&4 != 0 {
			need = want / 2
		}
		_, err := ss.Lease(want, need)
		return fmt.Sprintf("lease %d (need %d): %v", want, need, err)
	case 17:
		l := ss.Leased()
		lb := LeaseBlob{ID: l.FirstID + ids.ObjectID(b>>6), Offset: l.Offset + uint64(b%8)*64 - uint64(a&1)*32,
			Size: uint64(a>>1)*13%400 + uint64(b>>3&1)}
		err := ss.AdoptLeaseBlobs([]LeaseBlob{lb})
		if err == nil {
			fz.blobs = append(fz.blobs, lb.ID)
		}
		return fmt.Sprintf("adopt %+v of %+v: %v", lb, l, err)
	default:
		return fmt.Sprintf("incref %v: %v", fz.blob(b), ss.IncreaseReferenceCount([]ids.ObjectID{fz.blob(b)}))
	}
}
