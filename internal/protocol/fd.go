package protocol

import (
	"errors"
	"fmt"
	"net"

	"golang.org/x/sys/unix"
)

// ErrNoFd is returned by RecvFd when the peer's message carried no fd, or the
// kernel truncated the control data.
var ErrNoFd = errors.New("protocol: expected a file descriptor")

// MsgWriter writes one message with control data, as
// (*net.UnixConn).WriteMsgUnix does.
type MsgWriter interface {
	WriteMsgUnix(b, oob []byte, addr *net.UnixAddr) (n, oobn int, err error)
}

// SendFds sends each fd in its own message of one data byte with SCM_RIGHTS,
// as upstream's send_fd does, so upstream clients can receive them.
func SendFds(conn MsgWriter, fds []int) error {
	for _, fd := range fds {
		if _, _, err := conn.WriteMsgUnix([]byte{'F'}, unix.UnixRights(fd), nil); err != nil {
			return fmt.Errorf("protocol: send fd: %w", err)
		}
	}
	return nil
}

// MsgReader reads one message with its control data, as
// (*net.UnixConn).ReadMsgUnix does.
type MsgReader interface {
	ReadMsgUnix(b, oob []byte) (n, oobn, flags int, addr *net.UnixAddr, err error)
}

// RecvFd receives one fd sent by SendFds. The caller owns the returned fd
// (it has O_CLOEXEC set) and must close it.
func RecvFd(conn MsgReader) (int, error) {
	var data [1]byte
	oob := make([]byte, unix.CmsgSpace(4*4))
	n, oobn, flags, _, err := conn.ReadMsgUnix(data[:], oob)
	if err != nil {
		return -1, fmt.Errorf("protocol: receive fd: %w", err)
	}
	if n != 1 {
		return -1, ErrNoFd
	}
	msgs, err := unix.ParseSocketControlMessage(oob[:oobn])
	if err != nil {
		return -1, fmt.Errorf("protocol: receive fd: %w", err)
	}
	var fds []int
	for i := range msgs {
		got, err := unix.ParseUnixRights(&msgs[i])
		if err == nil {
			fds = append(fds, got...)
		}
	}
	if flags&unix.MSG_CTRUNC != 0 || len(fds) != 1 {
		for _, fd := range fds {
			_ = unix.Close(fd)
		}
		return -1, ErrNoFd
	}
	return fds[0], nil
}
