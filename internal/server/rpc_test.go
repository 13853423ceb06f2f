package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/sockcred/othertest"
	"github.com/v6d-io/v6d-go/internal/status"
)

func startRPC(t *testing.T, secret string) *Server {
	t.Helper()
	return startCfg(t, Config{Size: 8 << 20, MaxFrame: 1 << 16, RPCEndpoint: "127.0.0.1:0", RPCSecret: []byte(secret)})
}

func dialTCP(t *testing.T, s *Server) *raw {
	c, err := net.Dial("tcp", s.RPCEndpoint())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &raw{t, c}
}

func TestRPCConfig(t *testing.T) {
	for _, tc := range []struct {
		endpoint, secret string
		insecure         bool
		ok               bool
	}{
		{"", "", false, true},
		{"127.0.0.1:9600", "", false, true},
		{"localhost:0", "", false, true},
		{"[::1]:9600", "", false, true},
		{"0.0.0.0:9600", "", false, false},
		{":9600", "", false, false},
		{"example.com:9600", "", false, false},
		{"0.0.0.0:9600", "x", false, true},
		{"0.0.0.0:9600", "", true, true},
		{"127.0.0.1", "", false, false},
		{"127.0.0.1:70000", "", false, false},
		{"127.0.0.1:http", "", false, false},
		{"", "x", false, false},
	} {
		cfg := Config{Size: 1 << 20, RPCEndpoint: tc.endpoint, RPCSecret: []byte(tc.secret), RPCInsecure: tc.insecure}
		err := cfg.Validate()
		if (err == nil) != tc.ok || (err != nil && !errors.Is(err, ErrBadConfig)) {
			t.Errorf("%+v: %v", tc, err)
		}
	}
	// Start refuses it too, and leaves nothing behind.
	dir := t.TempDir()
	sock := filepath.Join(dir, "s.sock")
	if _, err := Start(Config{Socket: sock, Size: 1 << 20, RPCEndpoint: "0.0.0.0:0"}); !errors.Is(err, ErrBadConfig) ||
		!strings.Contains(err.Error(), "--rpc-auth-file") {
		t.Fatalf("start off loopback without a secret: %v", err)
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket left behind: %v", err)
	}
	// A port in use is an error of Start, with the UNIX socket removed.
	s := startRPC(t, "")
	if _, err := Start(Config{Socket: sock, Size: 1 << 20, RPCEndpoint: s.RPCEndpoint()}); err == nil {
		t.Fatal("second daemon on a bound port started")
	}
	if _, err := os.Stat(sock); !os.IsNotExist(err) {
		t.Fatalf("socket left behind: %v", err)
	}
}

// TestRPCProtocol speaks the protocol over TCP the way an upstream RPC client
// does: register, then create_remote_buffer with its bytes after the frame,
// get_remote_buffers with the bytes after the reply; and no fds anywhere.
func TestRPCProtocol(t *testing.T) {
	s := startRPC(t, "")
	r := dialTCP(t, s)
	if m := r.rpc(`{"type":"exists_request","id":1}`); m["code"] != float64(status.Invalid) {
		t.Fatalf("unregistered: %v", m)
	}
	m := r.rpc(`{"type":"register_request","version":"0.24.0"}`)
	if m["type"] != "register_reply" || m["rpc_endpoint"] != s.RPCEndpoint() {
		t.Fatalf("register: %v", m)
	}
	data := bytes.Repeat([]byte("0123456789abcdef"), 10_000) // larger than a read buffer
	r.send(`{"type":"create_remote_buffer_request","size":160000,"compress":false}`)
	if _, err := r.c.Write(data); err != nil {
		t.Fatal(err)
	}
	body, err := protocol.ReadFrame(r.c, nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var created struct {
		Type string      `json:"type"`
		ID   json.Number `json:"id"`
		Fd   int         `json:"fd"`
	}
	if err := json.Unmarshal(body, &created); err != nil || created.Type != "create_buffer_reply" || created.Fd != -1 {
		t.Fatalf("create_remote_buffer: %s", body)
	}
	id := created.ID.String()
	// Upstream's form of the id list, then the bytes after the reply.
	r.send(`{"type":"get_remote_buffers_request","num":1,"0":` + id + `,"unsafe":false,"compress":false}`)
	m = r.recv()
	if m["type"] != "get_buffers_reply" {
		t.Fatalf("get_remote_buffers: %v", m)
	}
	got := make([]byte, len(data))
	if _, err := io.ReadFull(r.c, got); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("bytes after get_buffers_reply: %v", err)
	}
	// A missing blob is an error reply with no bytes after it.
	if m := r.rpc(`{"type":"get_remote_buffers_request","ids":[9223372036854775809]}`); m["code"] != float64(status.ObjectNotExists) {
		t.Fatalf("missing blob: %v", m)
	}
	// Compression is refused, and the stream stays in step.
	if m := r.rpc(`{"type":"get_remote_buffers_request","ids":[1],"compress":true}`); m["code"] != float64(status.NotImplemented) {
		t.Fatalf("compressed get: %v", m)
	}
	// A fill into a blob that is not the connection's own is refused, its
	// bytes consumed.
	r.send(`{"type":"fill_buffers_request","ids":[` + id + `],"sizes":[3]}`)
	_, _ = r.c.Write([]byte("xyz"))
	if m := r.recv(); m["code"] == nil {
		t.Fatalf("fill of a sealed blob: %v", m)
	}
	if m := r.rpc(`{"type":"exists_request","id":1}`); m["type"] != "exists_reply" {
		t.Fatalf("in step after errors: %v", m)
	}
	// More than the arena announced: closed with an error.
	r.send(`{"type":"create_remote_buffer_request","size":1000000000}`)
	if m := r.recv(); m["code"] != float64(status.Invalid) {
		t.Fatalf("over the arena: %v", m)
	}
}

// TestRPCAuth: with a secret, nothing is served before a registration that
// presents it; a wrong or missing one is refused and the connection closed.
func TestRPCAuth(t *testing.T) {
	s := startRPC(t, "s3cret")
	for _, reg := range []string{
		`{"type":"register_request"}`,
		`{"type":"register_request","username":"u","password":""}`,
		`{"type":"register_request","password":"s3cre"}`,
		`{"type":"register_request","password":"s3cret\u0000"}`,
	} {
		r := dialTCP(t, s)
		if m := r.rpc(`{"type":"instance_status_request"}`); m["code"] != float64(status.Invalid) {
			t.Fatalf("before register: %v", m)
		}
		if m := r.rpc(reg); m["code"] != float64(status.ConnectionFailed) || !strings.Contains(m["message"].(string), "secret") {
			t.Fatalf("%s: %v", reg, m)
		}
		if _, err := protocol.ReadFrame(r.c, nil, 1<<20); err == nil {
			t.Fatalf("%s: connection still open", reg)
		}
	}
	r := dialTCP(t, s)
	if m := r.rpc(`{"type":"register_request","password":"s3cret"}`); m["type"] != "register_reply" {
		t.Fatalf("right secret: %v", m)
	}
	m := r.rpc(`{"type":"instance_status_request"}`)
	if m["type"] != "instance_status_reply" {
		t.Fatalf("after register: %v", m)
	}
	if st, _ := m["meta"].(map[string]any); st["rpc_connections"] != float64(1) || st["ipc_connections"] != float64(0) {
		t.Fatalf("connections counted: %v", m)
	}
	// The UNIX socket needs no secret.
	if m := dial(t, s).rpc(`{"type":"register_request"}`); m["type"] != "register_reply" {
		t.Fatalf("ipc register: %v", m)
	}
}

// TestRPCCompressedCreateCloses: compressed bytes have no known length, so
// the connection closes with an error that says why.
func TestRPCCompressedCreateCloses(t *testing.T) {
	s := startRPC(t, "")
	r := dialTCP(t, s)
	if m := r.rpc(`{"type":"register_request"}`); m["type"] != "register_reply" {
		t.Fatalf("register: %v", m)
	}
	m := r.rpc(`{"type":"create_remote_buffer_request","size":10,"compress":true}`)
	if msg, _ := m["message"].(string); m["code"] != float64(status.Invalid) || !strings.Contains(msg, "compressed") {
		t.Fatalf("compressed create: %v", m)
	}
	if _, err := protocol.ReadFrame(r.c, nil, 1<<20); err == nil {
		t.Fatal("connection still open")
	}
}

func init() {
	// As another user: try the UNIX socket (args[0]), then register over
	// TCP (args[1]) and ask for the list of objects; print what happened.
	othertest.Register("rpc-client", func(args []string) error {
		if c, err := net.Dial("unix", args[0]); err == nil {
			_ = c.Close()
			fmt.Println("unix: connected")
		} else {
			fmt.Println("unix: refused:", err)
		}
		c, err := net.Dial("tcp", args[1])
		if err != nil {
			return err
		}
		defer c.Close()
		for _, req := range []string{`{"type":"register_request"}`, `{"type":"list_data_request","pattern":"*","limit":10}`} {
			if _, err := c.Write(protocol.AppendFrame(nil, []byte(req))); err != nil {
				fmt.Println("tcp: write:", err)
				return nil
			}
			body, err := protocol.ReadFrame(c, nil, 1<<20)
			if err != nil {
				fmt.Println("tcp: read:", err)
				return nil
			}
			fmt.Printf("tcp: %s\n", body)
		}
		return nil
	})
}

// TestRPCOtherUserRefused: without a secret, a client of another user is
// refused over TCP as on the UNIX socket, with a reply that says why, while
// one of the daemon's user needs no configuration.
func TestRPCOtherUserRefused(t *testing.T) {
	othertest.Need(t)
	s := startRPC(t, "")
	if m := dialTCP(t, s).rpc(`{"type":"register_request"}`); m["type"] != "register_reply" {
		t.Fatalf("same user: %v", m)
	}
	out, err := othertest.Run(t, "rpc-client", s.Socket(), s.RPCEndpoint())
	t.Logf("uid %d:\n%s", othertest.UID, out)
	if err != nil {
		t.Fatal(err)
	}
	o := string(out)
	if !strings.Contains(o, "unix: refused") {
		t.Fatal("the other user reached the UNIX socket: the test proves nothing")
	}
	if !strings.Contains(o, `"code":`+strconv.Itoa(int(status.ConnectionFailed))) || !strings.Contains(o, "uid 1001") ||
		strings.Contains(o, "register_reply") || strings.Contains(o, "list_data_reply") {
		t.Fatal("the other user was not refused over TCP with a reason")
	}
}
