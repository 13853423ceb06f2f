// Package sockcred tells who is at the other end of a TCP connection that
// comes from this machine: the kernel's record of the user that created the
// client's socket, as SO_PEERCRED does for a UNIX socket. The daemon's TCP
// listener and the peer service use it to let in, without a secret, exactly
// the users its 0600 UNIX socket lets in (docs/security.md).
//
// The lookup asks the kernel's socket diagnostics (NETLINK_SOCK_DIAG, what
// `ss -e` uses; no privilege needed) for the one socket whose local address
// is the connection's remote address and whose remote address is the
// connection's local address. Such a socket exists in this network
// namespace only when the client runs on this machine (in the same
// namespace); its uid is the one of the process that created it. A
// connection from elsewhere finds no socket: ErrNotLocal.
package sockcred

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// ErrNotLocal is returned when no socket of this network namespace is the
// client end of the connection: the client is on another machine.
var ErrNotLocal = errors.New("sockcred: the client is not on this machine")

// Sizes and offsets of the kernel's structures (linux/inet_diag.h).
const (
	nlHdrLen       = 16 // struct nlmsghdr
	sockIDLen      = 48 // struct inet_diag_sockid
	reqLen         = 8 + sockIDLen
	msgUIDOffset   = 4 + sockIDLen + 12 // struct inet_diag_msg: idiag_uid
	msgMinLen      = msgUIDOffset + 8
	tcpTimeWait    = 6
	tcpNewSynRecv  = 12
	inetDiagNoCook = 0xffffffff
)

// fullStates are the TCP states of full sockets. Time-wait and request
// sockets are left out: the kernel reports uid 0 for them.
const fullStates = 0xffffffff &^ (1<<tcpTimeWait | 1<<tcpNewSynRecv)

var seq atomic.Uint32

// PeerUID returns the uid owning the client end of the TCP connection c,
// which this process accepted, or ErrNotLocal.
func PeerUID(c net.Conn) (uint32, error) {
	local, ok1 := c.LocalAddr().(*net.TCPAddr)
	remote, ok2 := c.RemoteAddr().(*net.TCPAddr)
	if !ok1 || !ok2 {
		return 0, fmt.Errorf("sockcred: %T is not a TCP connection", c)
	}
	return Lookup(remote, local)
}

// Lookup returns the uid owning the TCP socket of this network namespace
// bound to local and connected to remote, or ErrNotLocal.
func Lookup(local, remote *net.TCPAddr) (uint32, error) {
	if local == nil || remote == nil {
		return 0, errors.New("sockcred: no address")
	}
	family := uint8(unix.AF_INET)
	src, dst := local.IP.To4(), remote.IP.To4()
	if src == nil || dst == nil {
		family = unix.AF_INET6
		src, dst = local.IP.To16(), remote.IP.To16()
		if src == nil || dst == nil {
			return 0, fmt.Errorf("sockcred: bad addresses %v, %v", local, remote)
		}
	}
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return 0, fmt.Errorf("sockcred: netlink socket: %w", err)
	}
	defer func() { _ = unix.Close(fd) }()
	tv := unix.Timeval{Sec: 1}
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)

	n := seq.Add(1)
	msg := make([]byte, nlHdrLen+reqLen)
	le := binary.LittleEndian // netlink headers are in host order (little-endian on the platforms built for)
	le.PutUint32(msg[0:], uint32(len(msg)))
	le.PutUint16(msg[4:], unix.SOCK_DIAG_BY_FAMILY)
	le.PutUint16(msg[6:], unix.NLM_F_REQUEST)
	le.PutUint32(msg[8:], n)
	r := msg[nlHdrLen:]
	r[0], r[1] = family, unix.IPPROTO_TCP
	le.PutUint32(r[4:], fullStates)
	id := r[8:]
	binary.BigEndian.PutUint16(id[0:], uint16(local.Port))
	binary.BigEndian.PutUint16(id[2:], uint16(remote.Port))
	copy(id[4:20], src)
	copy(id[20:36], dst)
	le.PutUint32(id[40:], inetDiagNoCook)
	le.PutUint32(id[44:], inetDiagNoCook)
	if err := unix.Sendto(fd, msg, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return 0, fmt.Errorf("sockcred: netlink send: %w", err)
	}
	buf := make([]byte, 8192)
	for {
		m, _, err := unix.Recvfrom(fd, buf, 0)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return 0, fmt.Errorf("sockcred: netlink receive: %w", err)
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:m])
		if err != nil {
			return 0, fmt.Errorf("sockcred: netlink reply: %w", err)
		}
		for _, nm := range msgs {
			if nm.Header.Seq != n {
				continue
			}
			switch nm.Header.Type {
			case unix.NLMSG_ERROR:
				if len(nm.Data) >= 4 {
					if errno := -int32(le.Uint32(nm.Data)); errno == int32(unix.ENOENT) {
						return 0, ErrNotLocal
					} else if errno != 0 {
						return 0, fmt.Errorf("sockcred: socket diagnostics: %w", unix.Errno(errno))
					}
				}
				return 0, ErrNotLocal
			case unix.NLMSG_DONE:
				return 0, ErrNotLocal
			case unix.SOCK_DIAG_BY_FAMILY:
				d := nm.Data
				if len(d) < msgMinLen {
					return 0, fmt.Errorf("sockcred: short socket diagnostics reply (%d bytes)", len(d))
				}
				if st := d[1]; st == tcpTimeWait || st == tcpNewSynRecv {
					return 0, ErrNotLocal
				}
				rid := d[4 : 4+sockIDLen]
				if binary.BigEndian.Uint16(rid[0:]) != uint16(local.Port) || binary.BigEndian.Uint16(rid[2:]) != uint16(remote.Port) {
					return 0, ErrNotLocal
				}
				return le.Uint32(d[msgUIDOffset:]), nil
			}
		}
	}
}

// Trusted reports whether uid may do what this process's UNIX socket of
// mode 0600 lets do: it is this process's effective uid, or root (which no
// file mode keeps out).
func Trusted(uid uint32) bool { return uid == 0 || uid == uint32(os.Geteuid()) }

// Check returns nil when c comes from a process of this machine run by a
// Trusted user, else an error that says who it is.
func Check(c net.Conn) error {
	uid, err := PeerUID(c)
	return checkUID(uid, err)
}

// CheckAddrs is Check of the accepted connection from remote to local.
func CheckAddrs(local, remote *net.TCPAddr) error {
	uid, err := Lookup(remote, local)
	return checkUID(uid, err)
}

func checkUID(uid uint32, err error) error {
	if err != nil {
		return err
	}
	if !Trusted(uid) {
		return &UntrustedError{UID: uid}
	}
	return nil
}

// UntrustedError is Check's error for a local client of another user.
type UntrustedError struct{ UID uint32 }

func (e *UntrustedError) Error() string {
	return fmt.Sprintf("sockcred: the client runs as uid %d, not as this daemon's user (uid %d) or root", e.UID, os.Geteuid())
}
