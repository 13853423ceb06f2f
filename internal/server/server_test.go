package server

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/status"
)

func start(t testing.TB) *Server {
	t.Helper()
	return startCfg(t, Config{MaxFrame: 1 << 16})
}

type raw struct {
	t *testing.T
	c net.Conn
}

func dial(t *testing.T, s *Server) *raw {
	c, err := net.Dial("unix", s.Socket())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &raw{t, c}
}

func (r *raw) send(body string) {
	if _, err := r.c.Write(protocol.AppendFrame(nil, []byte(body))); err != nil {
		r.t.Fatal(err)
	}
}

func (r *raw) recv() map[string]any {
	body, err := protocol.ReadFrame(r.c, nil, 1<<20)
	if err != nil {
		r.t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		r.t.Fatal(err)
	}
	return m
}

func (r *raw) rpc(body string) map[string]any { r.send(body); return r.recv() }

func TestProtocolErrorsKeepServing(t *testing.T) {
	s := start(t)
	r := dial(t, s)
	if m := r.rpc(`{"type":"exists_request","id":1}`); m["code"] != float64(status.Invalid) {
		t.Fatalf("unregistered: %v", m)
	}
	if m := r.rpc(`{"type":"register_request","version":"0.24.0"}`); m["type"] != "register_reply" {
		t.Fatalf("register: %v", m)
	}
	for _, bad := range []string{`not json`, `{"type":"nope"}`, `{"size":1}`, `{"type":"create_buffer_request","size":"x"}`} {
		if m := r.rpc(bad); m["code"] != float64(status.Invalid) {
			t.Fatalf("%s: %v", bad, m)
		}
	}
	if m := r.rpc(`{"type":"exists_request","id":1}`); m["type"] != "exists_reply" {
		t.Fatalf("after errors: %v", m)
	}
	// A frame over the limit closes only that connection.
	var hdr [8]byte
	binary.LittleEndian.PutUint64(hdr[:], 1<<40)
	_, _ = r.c.Write(hdr[:])
	if _, err := protocol.ReadFrame(r.c, nil, 1<<20); !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("oversized frame: %v", err)
	}
	other := dial(t, s)
	if m := other.rpc(`{"type":"register_request"}`); m["type"] != "register_reply" {
		t.Fatalf("other connection: %v", m)
	}
}

func TestSocketRules(t *testing.T) {
	s := start(t)
	if _, err := Start(Config{Socket: s.Socket(), Size: 1 << 20}); err == nil || !strings.Contains(err.Error(), "another daemon") {
		t.Fatalf("second daemon on a served socket: %v", err)
	}
	fi, err := os.Stat(s.Socket())
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode: %v %v", fi, err)
	}
	path := s.Socket()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal("second close:", err)
	}
	// A stale socket file is replaced.
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	_ = ln.Close()
	s2, err := Start(Config{Socket: path, Size: 1 << 20})
	if err != nil {
		t.Fatalf("stale socket: %v", err)
	}
	_ = s2.Close()
}

func TestValidate(t *testing.T) {
	for _, c := range []Config{
		{Socket: "/tmp/x.sock"},
		{Socket: "/tmp/" + strings.Repeat("x", 120), Size: 1},
		{Socket: "/tmp/x.sock", Size: 1, Meta: "redis"},
		{Socket: "/tmp/x.sock", Size: 1, Meta: "etcd", InstanceID: 3},
		{Socket: "/tmp/x.sock", Size: 1, EtcdPrefix: "v6d"},
		{Socket: "/tmp/x.sock", Size: 1, SocketMode: 0o10000},
		{Socket: "/tmp/x.sock", Size: 1, DirectoryEntries: MaxDirectoryEntries + 1},
		{Socket: "/tmp/x.sock", Size: 1, MaxReplyBytes: protocol.MaxReplyFrame + 1},
	} {
		if err := c.Validate(); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}

// TestPipelinedRequests sends several requests in one write, as the client
// does with its deferred releases: each gets its reply, in order, and the
// held-back replies all arrive (also when the last one carries an fd).
func TestPipelinedRequests(t *testing.T) {
	s := start(t)
	r := dial(t, s)
	r.rpc(`{"type":"register_request","version":"0.24.0"}`)
	var batch []byte
	for _, body := range []string{
		`{"type":"exists_request","id":1}`,
		`{"type":"release_request","object_id":1,"ids":[2,3]}`,
		`{"type":"bogus_request"}`,
		`{"type":"exists_request","id":2}`,
	} {
		batch = protocol.AppendFrame(batch, []byte(body))
	}
	if _, err := r.c.Write(batch); err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"exists_reply", "release_reply", "", "exists_reply"} {
		m := r.recv()
		if got, _ := m["type"].(string); got != want {
			t.Fatalf("reply %d: %v, want type %q", i, m, want)
		}
	}
	// A reply with an fd after a held-back one: the fd must follow its reply.
	batch = protocol.AppendFrame(nil, []byte(`{"type":"exists_request","id":1}`))
	batch = protocol.AppendFrame(batch, []byte(`{"type":"create_buffer_request","size":64}`))
	if _, err := r.c.Write(batch); err != nil {
		t.Fatal(err)
	}
	if m := r.recv(); m["type"] != "exists_reply" {
		t.Fatalf("first reply: %v", m)
	}
	if m := r.recv(); m["type"] != "create_buffer_reply" || m["fd"].(float64) < 0 {
		t.Fatalf("second reply: %v", m)
	}
	fd, err := protocol.RecvFd(r.c.(*net.UnixConn))
	if err != nil {
		t.Fatal(err)
	}
	_ = unix.Close(fd)
}

// TestInvalidPipelinedCreate: a pipelined create_data whose fields decode
// but are invalid (here: no id) is answered as a pipelined failure, a
// pipelined_error frame ahead of the next reply, never with a reply of its
// own, which its client, awaiting none, would take for the next request's.
func TestInvalidPipelinedCreate(t *testing.T) {
	s := start(t)
	r := dial(t, s)
	r.rpc(`{"type":"register_request","version":"0.24.0"}`)
	batch := protocol.AppendFrame(nil, []byte(`{"type":"create_data_request","content":{"typename":"t"},"pipelined":true}`))
	batch = protocol.AppendFrame(batch, []byte(`{"type":"exists_request","id":1}`))
	if _, err := r.c.Write(batch); err != nil {
		t.Fatal(err)
	}
	m := r.recv()
	if msg, _ := m["message"].(string); m["type"] != protocol.PipelinedErrorType || !strings.Contains(msg, "needs an id") {
		t.Fatalf("first frame: %v, want a pipelined_error", m)
	}
	if m := r.recv(); m["type"] != "exists_reply" {
		t.Fatalf("second frame: %v, want the exists_reply", m)
	}
}

// TestErrReportsAcceptLoopDeath replaces the listening socket under the
// accept loop: the server stops and Err says why.
func TestErrReportsAcceptLoopDeath(t *testing.T) {
	s := start(t)
	if err := s.Err(); err != nil {
		t.Fatalf("running server: %v", err)
	}
	raw, err := s.ln.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	_ = raw.Control(func(fd uintptr) { err = unix.Dup3(int(null.Fd()), int(fd), unix.O_CLOEXEC) })
	if err != nil {
		t.Fatal(err)
	}
	// The listener's fd is now no socket. That raises no event: a deadline
	// wakes the loop, which retries (a timeout is passing) and then meets
	// the error.
	for stopped := false; !stopped; {
		_ = s.ln.SetDeadline(time.Now())
		time.Sleep(time.Millisecond)
		_ = s.ln.SetDeadline(time.Time{})
		select {
		case <-s.Done():
			stopped = true
		case <-time.After(50 * time.Millisecond):
		}
	}
	if err := s.Err(); err == nil || !strings.Contains(err.Error(), "accept") {
		t.Fatalf("Err() = %v, want the accept error", err)
	}
	if err := s.Close(); err == nil {
		t.Fatal("Close after a failure returned nil")
	}
}

// TestDefaults: the daemon's defaults are Validate's defaults plus the
// arena, the TCP listener and SchedAuto, and they validate as they are.
func TestDefaults(t *testing.T) {
	d := Defaults()
	if d.Size == 0 || d.RPCEndpoint != "127.0.0.1:9600" || d.SchedBatch != SchedAuto || d.Socket != DefaultSocket() ||
		d.PrefaultAhead != DefaultPrefaultAhead || d.MaxConnections == 0 || d.Meta != "local" ||
		d.PeerEndpoint != "" {
		t.Fatalf("Defaults() = %+v", d)
	}
	v := d
	if err := v.Validate(); err != nil {
		t.Fatal(err)
	}
	var zero Config
	zero.Size = d.Size
	_ = zero.Validate()
	if zero.MaxFrame != d.MaxFrame || zero.FrameTimeout != d.FrameTimeout || zero.SocketMode != d.SocketMode ||
		zero.RPCEndpoint != "" || zero.SchedBatch != SchedOff {
		t.Fatalf("a zero Config resolves to %+v", zero)
	}
}

// TestBlockingWaitEndsWhenTheClientGoesAway checks that a get_name that
// waits for ever ends when its client disconnects, learnt from the socket
// (no polling), and that its wait is unregistered in the store.
func TestBlockingWaitEndsWhenTheClientGoesAway(t *testing.T) {
	s := start(t)
	r := dial(t, s)
	if m := r.rpc(`{"type":"register_request"}`); m["type"] != "register_reply" {
		t.Fatalf("register: %v", m)
	}
	r.send(`{"type":"get_name_request","name":"never","wait":true}`)
	eventually(t, "the get_name to wait", func() bool { return s.waitingCount() == 1 && s.store.Waits() == 1 })
	_ = r.c.Close()
	eventually(t, "the wait to end", func() bool { return s.waitingCount() == 0 && s.store.Waits() == 0 })
}
