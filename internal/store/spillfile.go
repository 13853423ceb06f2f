package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// Spill files (spill.go). One file per spilled blob, in the spill
// directory, named o<id>.<generation>.spill (a generation per spill, so
// that the removal of an old file never hits a newer one of the same
// blob), mode 0600. A file is a header of spillHeaderSize bytes, then the
// blob's bytes:
//
//	0  magic "v6dspil1"
//	8  blob id (uint64, little endian)
//	16 size of the bytes (uint64)
//	24 CRC-32C (Castagnoli) of the bytes (uint32), then 4 zero bytes
//
// A load checks all of it and the file's length: a file removed, cut or
// changed is an IOError naming it, never wrong bytes.

const (
	spillMagic      = "v6dspil1"
	spillHeaderSize = 32
	spillSuffix     = ".spill"
	spillChunk      = 4 << 20 // bytes checksummed per write or read
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// spillFiles is the spill directory.
type spillFiles struct {
	dir string
}

// openSpillFiles checks the spill directory as the daemon checks its
// socket's (created 0700 if missing; else a directory, not a symlink, of
// this user, writable by nobody else: another user could read or replace
// the spilled bytes) and removes the spill files a daemon that died left
// in it (a file not named as ours is left alone).
func openSpillFiles(dir string) (*spillFiles, error) {
	if dir == "" {
		return nil, errors.New("store: empty spill path")
	}
	dir = filepath.Clean(dir)
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return nil, fmt.Errorf("store: create the spill directory's parent: %w", err)
	}
	if err := os.Mkdir(dir, 0o700); err == nil {
		if err := os.Chmod(dir, 0o700); err != nil {
			return nil, fmt.Errorf("store: chmod spill directory: %w", err)
		}
	} else if !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("store: create spill directory: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, fmt.Errorf("store: spill directory: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("store: spill path %s is not a directory (%v)", dir, fi.Mode().Type())
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return nil, fmt.Errorf("store: spill directory %s is owned by uid %d, not by this daemon's uid %d: "+
			"another user could read or replace spilled data; use a directory of your own", dir, st.Uid, os.Geteuid())
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return nil, fmt.Errorf("store: spill directory %s has mode %04o, writable by group or others: "+
			"another user could replace spilled data; chmod 0700 %s", dir, perm, dir)
	}
	if err := syscall.Access(dir, 0x2|0x1); err != nil { // W_OK|X_OK
		return nil, fmt.Errorf("store: spill directory %s is not writable: %w", dir, err)
	}
	f := &spillFiles{dir: dir}
	if err := f.removeStale(); err != nil {
		return nil, err
	}
	return f, nil
}

// removeStale removes every spill file in the directory.
func (f *spillFiles) removeStale() error {
	ents, err := os.ReadDir(f.dir)
	if err != nil {
		return fmt.Errorf("store: read spill directory: %w", err)
	}
	for _, e := range ents {
		if isSpillName(e.Name()) && e.Type().IsRegular() {
			if err := os.Remove(filepath.Join(f.dir, e.Name())); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return fmt.Errorf("store: remove stale spill file: %w", err)
			}
		}
	}
	return nil
}

// isSpillName reports whether name is a spill file's: o<16 hex>.<n>.spill.
func isSpillName(name string) bool {
	rest, ok := strings.CutSuffix(name, spillSuffix)
	if !ok || len(rest) < 19 || rest[0] != 'o' || rest[17] != '.' {
		return false
	}
	if _, err := strconv.ParseUint(rest[1:17], 16, 64); err != nil {
		return false
	}
	_, err := strconv.ParseUint(rest[18:], 10, 64)
	return err == nil
}

// name returns the path of the file of blob id's spill gen.
func (f *spillFiles) name(id ids.ObjectID, gen uint64) string {
	b := make([]byte, 0, len(f.dir)+40)
	b = append(b, f.dir...)
	b = append(b, '/')
	b = id.AppendText(b)
	b = append(b, '.')
	b = strconv.AppendUint(b, gen, 10)
	b = append(b, spillSuffix...)
	return string(b)
}

// write writes data, the bytes of blob id, to its file. On error the file
// is removed.
func (f *spillFiles) write(id ids.ObjectID, gen uint64, data []byte) (err error) {
	path := f.name(id, gen)
	fd, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("spill %v: %w", id, err)
	}
	defer func() {
		if cerr := fd.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("spill %v: %w", id, cerr)
		}
		if err != nil {
			_ = os.Remove(path)
		}
	}()
	var hdr [spillHeaderSize]byte
	if _, err := fd.WriteAt(hdr[:], 0); err != nil {
		return fmt.Errorf("spill %v: %w", id, err)
	}
	crc := uint32(0)
	for off := 0; off < len(data); off += spillChunk {
		chunk := data[off:min(off+spillChunk, len(data))]
		crc = crc32.Update(crc, castagnoli, chunk)
		if _, err := fd.WriteAt(chunk, int64(spillHeaderSize+off)); err != nil {
			return fmt.Errorf("spill %v: %w", id, err)
		}
	}
	copy(hdr[:8], spillMagic)
	binary.LittleEndian.PutUint64(hdr[8:], uint64(id))
	binary.LittleEndian.PutUint64(hdr[16:], uint64(len(data)))
	binary.LittleEndian.PutUint32(hdr[24:], crc)
	if _, err := fd.WriteAt(hdr[:], 0); err != nil {
		return fmt.Errorf("spill %v: %w", id, err)
	}
	return nil
}

// read reads the bytes of blob id from its file into buf (its size),
// checking the header, the length and the checksum.
func (f *spillFiles) read(id ids.ObjectID, gen uint64, buf []byte) error {
	path := f.name(id, gen)
	fd, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("its spill file: %w", err)
	}
	defer fd.Close()
	var hdr [spillHeaderSize]byte
	if _, err := io.ReadFull(fd, hdr[:]); err != nil {
		return fmt.Errorf("spill file %s has no header: %w", path, err)
	}
	if string(hdr[:8]) != spillMagic || ids.ObjectID(binary.LittleEndian.Uint64(hdr[8:])) != id ||
		binary.LittleEndian.Uint64(hdr[16:]) != uint64(len(buf)) {
		return fmt.Errorf("spill file %s is corrupt: its header does not describe blob %v of %d bytes", path, id, len(buf))
	}
	if fi, err := fd.Stat(); err != nil || fi.Size() != int64(spillHeaderSize+len(buf)) {
		return fmt.Errorf("spill file %s is corrupt: %d bytes long, want %d", path, fileSize(fi), spillHeaderSize+len(buf))
	}
	crc := uint32(0)
	for off := 0; off < len(buf); off += spillChunk {
		chunk := buf[off:min(off+spillChunk, len(buf))]
		if _, err := io.ReadFull(fd, chunk); err != nil {
			return fmt.Errorf("spill file %s: %w", path, err)
		}
		crc = crc32.Update(crc, castagnoli, chunk)
	}
	if want := binary.LittleEndian.Uint32(hdr[24:]); crc != want {
		return fmt.Errorf("spill file %s is corrupt: checksum %08x, want %08x", path, crc, want)
	}
	return nil
}

func fileSize(fi os.FileInfo) int64 {
	if fi == nil {
		return -1
	}
	return fi.Size()
}

// remove removes a spill file; one already gone is not an error.
func (f *spillFiles) remove(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}
