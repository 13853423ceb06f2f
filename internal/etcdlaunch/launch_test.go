package etcdlaunch

import (
	"errors"
	"net"
	"strconv"
	"strings"
	"testing"
)

func freeEndpoint(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return "http://127.0.0.1:" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}

// TestEnsure: nothing is launched where something answers or for another
// machine's endpoint; a command that dies says so with its output.
func TestEnsure(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if p, err := Ensure(Config{Cmd: "/nonexistent/etcd", Endpoint: "http://" + ln.Addr().String()}); p != nil || err != nil {
		t.Fatalf("an answering endpoint: %v, %v", p, err)
	}
	// 192.0.2.0/24 is TEST-NET-1: never this machine's.
	if _, err := Ensure(Config{Cmd: "/nonexistent/etcd", Endpoint: "http://192.0.2.1:2379"}); !errors.Is(err, ErrNotLocal) {
		t.Fatalf("another machine's endpoint: %v", err)
	}
	if _, err := Ensure(Config{Cmd: "/nonexistent/etcd", Endpoint: freeEndpoint(t)}); err == nil ||
		!strings.Contains(err.Error(), "/nonexistent/etcd") {
		t.Fatalf("a missing command: %v", err)
	}
	if _, err := Ensure(Config{Cmd: "sh", Endpoint: freeEndpoint(t)}); err == nil || !strings.Contains(err.Error(), "exited before serving") {
		t.Fatalf("a command that exits: %v", err)
	}
	if _, err := Ensure(Config{Cmd: "etcd", Endpoint: "unix:///x"}); err == nil || !strings.Contains(err.Error(), "http://HOST:PORT") {
		t.Fatalf("a unix endpoint: %v", err)
	}
}
