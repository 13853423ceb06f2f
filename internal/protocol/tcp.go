package protocol

import (
	"errors"
	"fmt"
	"net"
	"time"
)

// DialTCP connects to a daemon's TCP listener at addr ("host:port") and
// returns the connection as a Sock (blocking system calls, TCP_NODELAY on),
// with its timeout set as Dial does; timeout also bounds the connect (0 or
// less: none). Nothing but fds differs from a UNIX socket: Sock's reads and
// writes work the same on it.
func DialTCP(addr string, timeout time.Duration) (*Sock, error) {
	d := net.Dialer{Timeout: max(timeout, 0)}
	nc, err := d.Dial("tcp", addr)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return nil, fmt.Errorf("%w after %v: %w", ErrTimeout, timeout, err)
		}
		return nil, err
	}
	tc, ok := nc.(*net.TCPConn)
	if !ok {
		_ = nc.Close()
		return nil, fmt.Errorf("protocol: %s is not a TCP address", addr)
	}
	_ = tc.SetNoDelay(true)
	s, err := SockOf(tc)
	if err != nil {
		return nil, err
	}
	if err := s.SetTimeout(timeout); err != nil {
		_ = s.Close()
		return nil, err
	}
	return s, nil
}
