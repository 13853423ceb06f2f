package server

import (
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/status"
)

// Limits before authentication (rpc.go, docs/security.md).

func startPreAuth(t *testing.T, cfg Config) *Server {
	t.Helper()
	cfg.RPCEndpoint = "127.0.0.1:0"
	return startCfg(t, cfg)
}

func dialTCPRaw(t *testing.T, s *Server) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", s.RPCEndpoint())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// TestListenerCapsAreSeparate: idle TCP connections that never register
// fill the TCP listener's cap, and no more: UNIX clients are still served,
// and a refused client (UNIX or TCP) that writes its register_request
// before reading reads the reason, not "broken pipe".
func TestListenerCapsAreSeparate(t *testing.T) {
	s := startPreAuth(t, Config{MaxConnections: 3, MaxRPCConnections: 8})
	for range 8 {
		dialTCPRaw(t, s)
	}
	eventually(t, "8 TCP connections", func() bool { return s.rpcConnections() == 8 })
	// The 9th TCP client is refused, with the reason, after it wrote.
	c := dialTCPRaw(t, s)
	if _, err := c.Write(protocol.AppendFrame(nil, []byte(`{"type":"register_request"}`))); err != nil {
		t.Fatal(err)
	}
	got := recvUntilClosed(t, c)
	if len(got) != 1 || got[0]["code"] != float64(status.ConnectionError) || !strings.Contains(got[0]["message"].(string), "TCP listener") {
		t.Fatalf("9th TCP client got %v", got)
	}
	// UNIX clients up to their own cap are served.
	for i := range 3 {
		if m := dial(t, s).rpc(`{"type":"register_request"}`); m["type"] != "register_reply" {
			t.Fatalf("UNIX client %d beside 8 idle TCP connections: %v", i, m)
		}
	}
	// The 4th is refused; it reads the frame and the end of the stream,
	// then writes its registration as a client that did not read first
	// would: the write still works (the daemon reads and drops it), so a
	// client that writes before it reads gets the reason, not EPIPE.
	r := dialRaw(t, s.Socket())
	body, err := protocol.ReadFrame(r, nil, 1<<20)
	var m map[string]any
	if err != nil || json.Unmarshal(body, &m) != nil || m["code"] != float64(status.ConnectionError) ||
		!strings.Contains(m["message"].(string), "UNIX socket") {
		t.Fatalf("4th UNIX client: %s, %v", body, err)
	}
	if _, err := protocol.ReadFrame(r, nil, 1<<20); err == nil {
		t.Fatal("refused connection still open for writing")
	}
	if _, err := unix.Write(int(r), protocol.AppendFrame(nil, []byte(`{"type":"register_request"}`))); err != nil {
		t.Fatalf("a refused client's register_request: %v", err)
	}
}

// TestRegisterTimeout: a TCP connection that does not register within
// RegisterTimeout is told so and closed; a registered one stays.
func TestRegisterTimeout(t *testing.T) {
	s := startPreAuth(t, Config{RegisterTimeout: 200 * time.Millisecond})
	reg := &raw{t, dialTCPRaw(t, s)}
	if m := reg.rpc(`{"type":"register_request"}`); m["type"] != "register_reply" {
		t.Fatalf("register: %v", m)
	}
	idle := dialTCPRaw(t, s)
	got := recvUntilClosed(t, idle)
	if len(got) != 1 || got[0]["code"] != float64(status.ConnectionFailed) || !strings.Contains(got[0]["message"].(string), "no register_request") {
		t.Fatalf("idle connection got %v", got)
	}
	// One that sends a request but never registers is closed too.
	chatty := &raw{t, dialTCPRaw(t, s)}
	if m := chatty.rpc(`{"type":"exists_request","id":1}`); m["code"] != float64(status.Invalid) {
		t.Fatalf("before register: %v", m)
	}
	if got := recvUntilClosed(t, chatty.c); len(got) != 1 || got[0]["code"] != float64(status.ConnectionFailed) {
		t.Fatalf("chatty connection got %v", got)
	}
	// A half frame is cut at the same deadline.
	half := dialTCPRaw(t, s)
	if _, err := half.Write(protocol.AppendFrame(nil, []byte(`{"type":"register_request"}`))[:12]); err != nil {
		t.Fatal(err)
	}
	if got := recvUntilClosed(t, half); len(got) != 1 || got[0]["code"] != float64(status.ConnectionFailed) {
		t.Fatalf("half frame got %v", got)
	}
	if m := reg.rpc(`{"type":"exists_request","id":1}`); m["type"] != "exists_reply" {
		t.Fatalf("registered connection after the timeout: %v", m)
	}
	// UNIX clients have no such deadline: they passed the socket's mode.
	u := dial(t, s)
	time.Sleep(400 * time.Millisecond) // twice the register timeout, to show it does not apply
	if m := u.rpc(`{"type":"register_request"}`); m["type"] != "register_reply" {
		t.Fatalf("UNIX register after a while: %v", m)
	}
}

// TestPreAuthFrameCap: before it registered, a TCP client can make the
// daemon read no frame above preAuthMaxFrame and no bytes after a frame;
// such a request closes the connection with the reason, and nothing is
// charged to the in-flight budget.
func TestPreAuthFrameCap(t *testing.T) {
	s := startPreAuth(t, Config{MaxFrame: 64 << 20})
	big := dialTCPRaw(t, s)
	hdr := protocol.AppendFrame(nil, nil)
	hdr[0], hdr[1], hdr[2] = 0, 0, 2 // 128 KiB announced
	if _, err := big.Write(append(hdr, make([]byte, 1024)...)); err != nil {
		t.Fatal(err)
	}
	got := recvUntilClosed(t, big)
	if len(got) != 1 || got[0]["code"] != float64(status.Invalid) || !strings.Contains(got[0]["message"].(string), "register") {
		t.Fatalf("large frame before register got %v", got)
	}
	if n := s.inflight.Load(); n != 0 {
		t.Fatalf("%d bytes charged for an unauthenticated client", n)
	}
	tr := &raw{t, dialTCPRaw(t, s)}
	tr.send(`{"type":"create_remote_buffer_request","size":1000000}`)
	if got := recvUntilClosed(t, tr.c); len(got) != 1 || got[0]["code"] != float64(status.Invalid) ||
		!strings.Contains(got[0]["message"].(string), "before the client registered") {
		t.Fatalf("trailing bytes before register got %v", got)
	}
	// After registering, large frames are read as usual.
	ok := &raw{t, dialTCPRaw(t, s)}
	if m := ok.rpc(`{"type":"register_request"}`); m["type"] != "register_reply" {
		t.Fatalf("register: %v", m)
	}
	if m := ok.rpc(string(padded(128 << 10))); m["type"] != "exists_reply" {
		t.Fatalf("128 KiB frame after register: %v", m)
	}
}

// FuzzRegisterGate: whatever bytes a TCP client sends, with a secret
// configured, it gets only error replies until a register_request with the
// secret, its connection closes in bounded time, nothing stays charged, and
// the daemon keeps serving.
func FuzzRegisterGate(f *testing.F) {
	for _, seed := range [][]byte{
		protocol.AppendFrame(nil, []byte(`{"type":"register_request","password":"s3cret"}`)),
		protocol.AppendFrame(nil, []byte(`{"type":"register_request","password":"wrong"}`)),
		protocol.AppendFrame(protocol.AppendFrame(nil, []byte(`{"type":"list_data_request","pattern":"*"}`)),
			[]byte(`{"type":"register_request","password":"s3cret"}`)),
		protocol.AppendFrame(nil, []byte(`{"type":"create_remote_buffer_request","size":4096}`)),
		protocol.AppendFrame(nil, []byte(`{"type":"clear_request"}`)),
		{0, 0, 0, 1, 0, 0, 0, 0},
		{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f},
		[]byte("GET / HTTP/1.1\r\n\r\n"),
	} {
		f.Add(seed)
	}
	dir := f.TempDir()
	s, err := Start(Config{Socket: dir + "/s.sock", Size: 4 << 20, RPCEndpoint: "127.0.0.1:0", RPCSecret: []byte("s3cret"),
		RegisterTimeout: 2 * time.Second, Logger: quietLogger()})
	if err != nil {
		f.Fatal(err)
	}
	defer s.Close()
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := net.Dial("tcp", s.RPCEndpoint())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, _ = c.Write(data)
		_ = c.(*net.TCPConn).CloseWrite()
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		authed := strings.Contains(string(data), `"password":"s3cret"`)
		registered := false
		for {
			body, err := protocol.ReadFrame(c, nil, 1<<20)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("the connection stayed open")
			}
			if err != nil {
				break
			}
			var m map[string]any
			if err := json.Unmarshal(body, &m); err != nil {
				t.Fatalf("reply %q: %v", body, err)
			}
			switch {
			case m["type"] == "register_reply":
				if !authed {
					t.Fatalf("registered without the secret: %q", data)
				}
				registered = true
			case m["code"] != nil:
			case !registered:
				t.Fatalf("%v served before registration: %q", m, data)
			}
		}
		eventually(t, "the budget to be released", func() bool { return s.inflight.Load() == 0 })
	})
}

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
