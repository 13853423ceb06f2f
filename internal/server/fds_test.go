package server

import (
	"fmt"
	"net"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/v6d-io/v6d-go/internal/protocol"
)

// recvArenaFd receives one fd and returns its access mode (O_RDONLY or
// O_RDWR) and inode, closing it.
func (r *raw) recvArenaFd() (mode int, ino uint64) {
	r.t.Helper()
	fd, err := protocol.RecvFd(r.c.(*net.UnixConn))
	if err != nil {
		r.t.Fatal(err)
	}
	defer unix.Close(fd)
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil {
		r.t.Fatal(err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		r.t.Fatal(err)
	}
	return flags & unix.O_ACCMODE, st.Ino
}

// storeFd returns the store_fd of the first payload of a buffers reply.
func storeFd(t *testing.T, m map[string]any) int {
	t.Helper()
	ps, ok := m["payloads"].([]any)
	if !ok || len(ps) == 0 {
		t.Fatalf("no payloads in %v", m)
	}
	return int(ps[0].(map[string]any)["store_fd"].(float64))
}

func fds(m map[string]any) []any {
	v, _ := m["fds"].([]any)
	return v
}

// TestArenaFds: a client that gets receives the read-only fd, once; the
// read-write fd comes only with a create, once; the two have distinct
// store_fd keys (so upstream clients, which key mappings by store_fd, map
// each with its own protection) and are the same file.
func TestArenaFds(t *testing.T) {
	s := start(t)
	writer, reader := dial(t, s), dial(t, s)
	for _, r := range []*raw{writer, reader} {
		r.rpc(`{"type":"register_request","version":"0.24.0"}`)
	}

	m := writer.rpc(`{"type":"create_buffer_request","size":64}`)
	rw := int(m["fd"].(float64))
	if m["type"] != "create_buffer_reply" || rw < 0 || int(m["created"].(map[string]any)["store_fd"].(float64)) != rw {
		t.Fatalf("create reply %v", m)
	}
	mode, ino := writer.recvArenaFd()
	if mode != unix.O_RDWR {
		t.Fatalf("create sent an fd of mode %#x, want O_RDWR", mode)
	}
	bid := uint64(m["id"].(float64))
	if m := writer.rpc(fmt.Sprintf(`{"type":"seal_request","object_id":%d}`, bid)); m["type"] != "seal_reply" {
		t.Fatalf("seal: %v", m)
	}

	get := fmt.Sprintf(`{"type":"get_buffers_request","ids":[%d]}`, bid)
	m = reader.rpc(get)
	ro := storeFd(t, m)
	if f := fds(m); ro == rw || len(f) != 1 || int(f[0].(float64)) != ro {
		t.Fatalf("get reply %v: want the read-only fd, not %d", m, rw)
	}
	if mode, rino := reader.recvArenaFd(); mode != unix.O_RDONLY || rino != ino {
		t.Fatalf("get sent an fd of mode %#x, inode %d; want O_RDONLY of inode %d", mode, rino, ino)
	}
	if m := reader.rpc(get); len(fds(m)) != 0 || storeFd(t, m) != ro {
		t.Fatalf("second get reply %v: the fd goes once", m)
	}

	// The writer's get of its sealed blob gets the read-only fd too.
	if m := writer.rpc(get); storeFd(t, m) != ro || len(fds(m)) != 1 {
		t.Fatalf("writer's get reply %v", m)
	}
	if mode, _ := writer.recvArenaFd(); mode != unix.O_RDONLY {
		t.Fatalf("writer's get sent mode %#x", mode)
	}

	// The reader's first create brings the read-write fd, once.
	m = reader.rpc(`{"type":"create_buffers_request","num":1,"sizes":[32]}`)
	if f := fds(m); storeFd(t, m) != rw || len(f) != 1 || int(f[0].(float64)) != rw {
		t.Fatalf("reader's create reply %v", m)
	}
	if mode, _ := reader.recvArenaFd(); mode != unix.O_RDWR {
		t.Fatalf("reader's create sent mode %#x", mode)
	}
	if m := reader.rpc(`{"type":"create_buffer_request","size":32}`); int(m["fd"].(float64)) != -1 {
		t.Fatalf("second create reply %v: the fd goes once", m)
	}
}
