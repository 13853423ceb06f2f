package sockcred_test

import (
	"errors"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/v6d-io/v6d-go/internal/sockcred"
	"github.com/v6d-io/v6d-go/internal/sockcred/othertest"
)

func init() {
	othertest.Register("dial", func(args []string) error {
		c, err := net.Dial("tcp", args[0])
		if err != nil {
			return err
		}
		var b [1]byte
		_, _ = c.Read(b[:]) // until the test closes it
		return c.Close()
	})
}

func TestMain(m *testing.M) {
	othertest.Main()
	os.Exit(m.Run())
}

// accept returns the server end of one connection to ln from dial.
func accept(t *testing.T, ln net.Listener, dial func()) net.Conn {
	t.Helper()
	go dial()
	c, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func TestSameUserIsTrusted(t *testing.T) {
	for _, network := range []string{"127.0.0.1:0", "[::1]:0"} {
		ln, err := net.Listen("tcp", network)
		if err != nil {
			t.Skipf("%s: %v", network, err)
		}
		t.Cleanup(func() { _ = ln.Close() })
		client, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c := accept(t, ln, func() {})
		uid, err := sockcred.PeerUID(c)
		if err != nil || uid != uint32(os.Geteuid()) {
			t.Fatalf("%s: uid %d, %v; want %d", network, uid, err, os.Geteuid())
		}
		if err := sockcred.Check(c); err != nil {
			t.Fatal(err)
		}
		_ = client.Close()
	}
}

func TestNoSocketIsNotLocal(t *testing.T) {
	// A 4-tuple no socket has.
	_, err := sockcred.Lookup(&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1},
		&net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 2})
	if !errors.Is(err, sockcred.ErrNotLocal) {
		t.Fatalf("got %v, want ErrNotLocal", err)
	}
}

func TestOtherUserIsNotTrusted(t *testing.T) {
	othertest.Need(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	errc := make(chan error, 1)
	c := accept(t, ln, func() {
		out, err := othertest.Run(t, "dial", ln.Addr().String())
		if err != nil {
			err = errors.New(err.Error() + ": " + string(out))
		}
		errc <- err
	})
	uid, err := sockcred.PeerUID(c)
	if err != nil || uid != othertest.UID {
		t.Fatalf("uid %d, %v; want %d", uid, err, othertest.UID)
	}
	err = sockcred.Check(c)
	var ue *sockcred.UntrustedError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), strconv.Itoa(othertest.UID)) {
		t.Fatalf("Check: %v", err)
	}
	_ = c.Close()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}
