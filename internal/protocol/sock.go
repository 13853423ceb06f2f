package protocol

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Sock is a UNIX stream socket in blocking mode: every read and write is a
// plain system call on the calling thread, outside Go's network poller.
//
// Both ends of the protocol use it. Through the poller, a message wakes a
// poller thread first, which then wakes the goroutine's thread (for a client
// called from C or Python, the caller's own thread, locked to its
// goroutine): two wake-ups per message instead of one. Measured here, a
// client round trip went from about 50 µs to about 22 µs against a raw C
// socket round trip of 11 µs. A blocked reader holds an OS thread, which is
// fine for the tens of local connections an IPC daemon serves.
//
// A Sock may have a timeout (SetTimeout): every blocking system call on it
// (connect, each read, each write) then gives up after that long with an
// error wrapping ErrTimeout. It is a socket option (SO_RCVTIMEO and
// SO_SNDTIMEO), so it costs nothing per call, and the timeout of the poll
// each read waits in first (waitReadable). It bounds each wait, not a whole
// message: a peer that trickles bytes can take longer.
//
// A Sock is not safe for concurrent reads or concurrent writes, nor for
// SetTimeout concurrent with either; Shutdown may be called at any time to
// wake a blocked reader.
type Sock struct {
	fd      int
	timeout time.Duration // 0: none
}

// ErrTimeout is wrapped by the errors of a Sock's reads, writes and Dial's
// connect when the timeout passed before the system call could complete. The
// error wraps unix.EAGAIN too. After it a stream may be cut in the middle of
// a message: the caller should treat the connection as lost.
var ErrTimeout = errors.New("protocol: socket timed out")

// Dial connects to the UNIX socket at path and sets the socket's timeout
// (see SetTimeout; 0 or less: none), which bounds the connect too: a daemon
// whose listen backlog is full and that accepts nothing makes Dial fail with
// ErrTimeout instead of blocking forever.
func Dial(path string, timeout time.Duration) (*Sock, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, &net.OpError{Op: "socket", Net: "unix", Err: err}
	}
	s := &Sock{fd: fd}
	if err := s.SetTimeout(timeout); err != nil {
		_ = unix.Close(fd)
		return nil, &net.OpError{Op: "setsockopt", Net: "unix", Err: err}
	}
	for {
		err = unix.Connect(fd, &unix.SockaddrUnix{Name: path})
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err != nil {
		_ = unix.Close(fd)
		return nil, &net.OpError{Op: "dial", Net: "unix", Err: s.wrap(err)}
	}
	return s, nil
}

// SetTimeout sets how long each blocking system call on s may wait (see
// Sock); 0 or less removes the limit. It applies to calls made afterwards.
func (s *Sock) SetTimeout(d time.Duration) error {
	if d < 0 {
		d = 0
	}
	tv := unix.NsecToTimeval(d.Nanoseconds())
	if d > 0 && tv.Sec == 0 && tv.Usec == 0 {
		tv.Usec = 1 // a timeval of zero would mean no limit
	}
	for _, opt := range []int{unix.SO_RCVTIMEO, unix.SO_SNDTIMEO} {
		if err := unix.SetsockoptTimeval(s.fd, unix.SOL_SOCKET, opt, &tv); err != nil {
			return fmt.Errorf("protocol: set socket timeout: %w", err)
		}
	}
	s.timeout = d
	return nil
}

// Timeout returns the timeout SetTimeout set, 0 for none.
func (s *Sock) Timeout() time.Duration { return s.timeout }

// wrap marks EAGAIN, which a blocking socket returns only when its timeout
// passed, as ErrTimeout.
func (s *Sock) wrap(err error) error {
	if s.timeout > 0 && errors.Is(err, unix.EAGAIN) {
		return fmt.Errorf("%w after %v: %w", ErrTimeout, s.timeout, err)
	}
	return err
}

// SockOf takes over an accepted connection (UNIX or TCP): it duplicates the
// socket in blocking mode and closes nc.
func SockOf(nc interface {
	syscall.Conn
	Close() error
}) (*Sock, error) {
	defer func() { _ = nc.Close() }()
	raw, err := nc.SyscallConn()
	if err != nil {
		return nil, err
	}
	fd := -1
	var dupErr error
	if err := raw.Control(func(s uintptr) {
		fd, dupErr = unix.FcntlInt(s, unix.F_DUPFD_CLOEXEC, 0)
	}); err != nil {
		return nil, err
	}
	if dupErr != nil {
		return nil, fmt.Errorf("protocol: dup socket: %w", dupErr)
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		_ = unix.Close(fd)
		return nil, fmt.Errorf("protocol: set socket blocking: %w", err)
	}
	return &Sock{fd: fd}, nil
}

// Fd returns the socket's file descriptor, owned by s.
func (s *Sock) Fd() int { return s.fd }

// WaitReadable sleeps in poll(POLLIN) until fd has something to read (data,
// the end of the stream or an error: true) or timeout passed (false; 0 or
// less waits without end). A signal does not end the wait early (Go's
// preemption sends them): it goes on for what is left of timeout.
//
// A reader that sleeps in poll(POLLIN) instead of in recv is not woken when
// the peer reads what this end wrote: on a UNIX socket that read frees the
// writer's buffer and wakes every sleeper on the writer's socket to announce
// write space, a blocked recv included, which then finds nothing and sleeps
// again. poll's wake-up filters by event, so the reply is the one wake-up
// (docs/performance.md, "Why nothing polls": two context switches fewer
// per round trip). The client's reads (Sock) and the daemon's connections
// wait here.
func WaitReadable(fd int, timeout time.Duration) (bool, error) {
	p := [1]unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	ms, until := -1, time.Time{}
	if timeout > 0 {
		ms, until = ceilMs(timeout), time.Now().Add(timeout)
	}
	for {
		n, err := unix.Poll(p[:], ms)
		if !errors.Is(err, unix.EINTR) {
			return n > 0, err
		}
		if timeout > 0 {
			left := time.Until(until)
			if left <= 0 {
				return false, nil
			}
			ms = ceilMs(left)
		}
	}
}

// ceilMs is d in whole milliseconds, rounded up (poll's unit).
func ceilMs(d time.Duration) int {
	return int((d + time.Millisecond - 1) / time.Millisecond)
}

// waitReadable waits until the socket has something to read, at most the
// socket's timeout (ErrTimeout).
func (s *Sock) waitReadable() error {
	ready, err := WaitReadable(s.fd, s.timeout)
	switch {
	case err != nil:
		return err
	case !ready:
		return s.wrap(unix.EAGAIN)
	}
	return nil
}

// Read reads into b, retrying on EINTR; a peer that closed is io.EOF.
func (s *Sock) Read(b []byte) (int, error) {
	for {
		if err := s.waitReadable(); err != nil {
			return 0, err
		}
		n, err := unix.Read(s.fd, b)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case err != nil:
			return 0, s.wrap(err)
		case n == 0 && len(b) > 0:
			return 0, io.EOF
		}
		return n, nil
	}
}

// Write writes all of b, retrying on EINTR and short writes.
func (s *Sock) Write(b []byte) (int, error) {
	done := 0
	for done < len(b) {
		n, err := unix.Write(s.fd, b[done:])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return done, s.wrap(err)
		}
		done += n
	}
	return done, nil
}

// maxIovecs is the most buffers one writev takes (Linux's IOV_MAX); more
// would fail with EINVAL.
const maxIovecs = 1024

// Writev writes all of bufs, in order, with as few system calls as the
// kernel allows (writev, of at most maxIovecs buffers each), retrying on
// EINTR and short writes.
func (s *Sock) Writev(bufs [][]byte) error {
	for len(bufs) > 0 {
		if len(bufs[0]) == 0 {
			bufs = bufs[1:]
			continue
		}
		n, err := unix.Writev(s.fd, bufs[:min(len(bufs), maxIovecs)])
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return s.wrap(err)
		}
		for n > 0 && len(bufs) > 0 {
			if n >= len(bufs[0]) {
				n -= len(bufs[0])
				bufs = bufs[1:]
				continue
			}
			bufs[0] = bufs[0][n:]
			n = 0
		}
	}
	return nil
}

// ReadMsgUnix reads one message with its control data; received fds are
// close-on-exec. It has the shape of (*net.UnixConn).ReadMsgUnix.
func (s *Sock) ReadMsgUnix(b, oob []byte) (n, oobn, flags int, addr *net.UnixAddr, err error) {
	for {
		if err := s.waitReadable(); err != nil {
			return 0, 0, 0, nil, err
		}
		n, oobn, flags, _, err = unix.Recvmsg(s.fd, b, oob, unix.MSG_CMSG_CLOEXEC)
		if !errors.Is(err, unix.EINTR) {
			return n, oobn, flags, nil, s.wrap(err)
		}
	}
}

// WriteMsgUnix writes one message with control data; addr must be nil. It
// has the shape of (*net.UnixConn).WriteMsgUnix.
func (s *Sock) WriteMsgUnix(b, oob []byte, addr *net.UnixAddr) (n, oobn int, err error) {
	if addr != nil {
		return 0, 0, errors.New("protocol: WriteMsgUnix on a connected socket takes no address")
	}
	for {
		n, err = unix.SendmsgN(s.fd, b, oob, nil, 0)
		if !errors.Is(err, unix.EINTR) {
			if err != nil {
				return n, 0, s.wrap(err)
			}
			return n, len(oob), nil
		}
	}
}

// Shutdown shuts both directions down, waking a reader blocked in Read.
func (s *Sock) Shutdown() error { return unix.Shutdown(s.fd, unix.SHUT_RDWR) }

// Close shuts the socket down and closes it.
func (s *Sock) Close() error {
	_ = s.Shutdown()
	return unix.Close(s.fd)
}
