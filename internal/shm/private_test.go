package shm

import (
	"bytes"
	"errors"
	"testing"
)

func TestMapPrivate(t *testing.T) {
	a := newArena(t, 4*pageSize)
	data := a.Bytes()
	for i := range data {
		data[i] = byte(i % 251)
	}
	off, size := pageSize+100, 2*pageSize
	m, view, err := MapPrivate(a.Fd(), off, size)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if uint64(len(view)) != size || !bytes.Equal(view, data[off:off+size]) {
		t.Fatal("private view differs from the file")
	}
	if len(m.Bytes()) != int(3*pageSize) {
		t.Fatalf("mapping is %d bytes, want the 3 pages around the range", len(m.Bytes()))
	}
	view[0] = 0xAA
	if data[off] == 0xAA {
		t.Fatal("a write through the private view reached the file")
	}
	// Pages not written still show the file.
	data[off+pageSize+1] = 0xBB
	if view[pageSize+1] != 0xBB {
		t.Fatal("an unwritten page of the private view does not show the file")
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestMapPrivateBounds(t *testing.T) {
	a := newArena(t, 2*pageSize)
	for _, tc := range []struct {
		off, size uint64
		want      error
	}{
		{0, 0, ErrBadSize},
		{0, 2*pageSize + 1, ErrOutOfBounds},
		{2 * pageSize, 1, ErrOutOfBounds},
		{1 << 63, 1 << 63, ErrOutOfBounds},
	} {
		if m, _, err := MapPrivate(a.Fd(), tc.off, tc.size); !errors.Is(err, tc.want) {
			if m != nil {
				m.Close()
			}
			t.Errorf("MapPrivate(%d, %d) = %v, want %v", tc.off, tc.size, err, tc.want)
		}
	}
	if _, _, err := MapPrivate(-1, 0, 1); err == nil {
		t.Error("MapPrivate of a bad fd succeeded")
	}
}
