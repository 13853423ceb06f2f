package protocol

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// listenNoAccept listens on a temp socket with a backlog of 0 and never
// accepts: the kernel completes one connect, further ones block.
func listenNoAccept(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "s.sock")
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestSockTimeout(t *testing.T) {
	path := listenNoAccept(t)
	s, err := Dial(path, 50*time.Millisecond)
	if err != nil {
		t.Fatalf("first Dial: %v", err)
	}
	defer s.Close()
	if s.Timeout() != 50*time.Millisecond {
		t.Fatalf("Timeout() = %v", s.Timeout())
	}
	var b [8]byte
	if _, err := s.Read(b[:]); !errors.Is(err, ErrTimeout) || !errors.Is(err, unix.EAGAIN) {
		t.Fatalf("Read from a silent peer = %v, want ErrTimeout", err)
	}
	if _, err := RecvFd(s); !errors.Is(err, ErrTimeout) {
		t.Fatalf("RecvFd from a silent peer = %v, want ErrTimeout", err)
	}
	// Nobody reads: writes fill the socket buffer, then time out.
	big := make([]byte, 1<<20)
	var werr error
	for range 64 {
		if _, werr = s.Write(big); werr != nil {
			break
		}
	}
	if !errors.Is(werr, ErrTimeout) {
		t.Fatalf("Write to a peer that never reads = %v, want ErrTimeout", werr)
	}
	if err := s.Writev([][]byte{big}); !errors.Is(err, ErrTimeout) {
		t.Fatalf("Writev = %v, want ErrTimeout", err)
	}

	// The backlog is full now: a connect blocks, and gives up.
	if _, err := Dial(path, 50*time.Millisecond); !errors.Is(err, ErrTimeout) {
		t.Fatalf("Dial to a full backlog = %v, want ErrTimeout", err)
	}
}

func TestSockNoTimeout(t *testing.T) {
	path := listenNoAccept(t)
	s, err := Dial(path, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if s.Timeout() != 0 {
		t.Fatalf("Timeout() = %v, want none", s.Timeout())
	}
	// A sub-microsecond timeout is not "none".
	if err := s.SetTimeout(time.Nanosecond); err != nil {
		t.Fatal(err)
	}
	var b [1]byte
	if _, err := s.Read(b[:]); !errors.Is(err, ErrTimeout) {
		t.Fatalf("Read with a 1 ns timeout = %v", err)
	}
	// Without a timeout a read blocks until the peer goes; Shutdown ends it.
	if err := s.SetTimeout(0); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { _, err := s.Read(b[:]); done <- err }()
	select {
	case err := <-done:
		t.Fatalf("Read without a timeout returned %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	_ = s.Shutdown()
	if err := <-done; errors.Is(err, ErrTimeout) {
		t.Fatalf("Read after Shutdown = %v", err)
	}
}
