package client

import (
	"math"
	"time"

	"github.com/v6d-io/v6d-go/internal/status"
)

// Timeouts. Every exchange with the daemon is bounded: each blocking read
// and write on the socket (and the connect) gives up after the client's
// timeout, a socket option (protocol.Sock.SetTimeout) that costs nothing per
// call. A call that times out fails with status Timeout, and the connection
// is lost from then on: the daemon may still answer, and its late reply
// would be read as the next call's. The socket stays open until Close, so
// the daemon keeps every reference the client holds and the client's views
// stay valid; later calls fail at once with ConnectionError.

// DefaultTimeout is the timeout of a client unless WithTimeout or SetTimeout
// says otherwise: generous, as upstream's 300 s, so that only a daemon that
// is stopped or hung trips it.
const DefaultTimeout = 300 * time.Second

// MaxTimeout is the largest timeout a client accepts: 2^31-1 ms (about 24.8
// days), the range of upstream's and most C APIs' int32 milliseconds. It
// also bounds the wait of GetName.
const MaxTimeout = math.MaxInt32 * time.Millisecond

// Option configures Connect.
type Option func(*options)

type options struct {
	timeout     time.Duration
	secret      string // ConnectRPC's (remote.go)
	secretSet   bool
	noDirectory bool  // WithoutDirectory (directory.go)
	accel       Accel // WithAccel (accel.go), when accelSet
	accelSet    bool
}

// WithTimeout sets the timeout of the connect, the registration and every
// later call (see SetTimeout) to d, which must lie in [1 ms, MaxTimeout];
// otherwise Connect fails with Invalid.
func WithTimeout(d time.Duration) Option {
	return func(o *options) { o.timeout = d }
}

// checkTimeout returns an Invalid error unless d is a timeout a client
// accepts.
func checkTimeout(d time.Duration) error {
	if d < time.Millisecond || d > MaxTimeout {
		return status.Errorf(status.Invalid,
			"timeout %v out of range: it must be at least 1 ms and at most %d ms", d, int64(math.MaxInt32))
	}
	return nil
}

// MillisTimeout converts a timeout in milliseconds, as the C ABI and Python
// give it, into one SetTimeout accepts: ms must lie in [1, 2^31-1], else
// the error is Invalid (so no value can overflow the conversion).
func MillisTimeout(ms int64) (time.Duration, error) {
	if ms < 1 || ms > math.MaxInt32 {
		return 0, status.Errorf(status.Invalid,
			"timeout %d ms out of range: it must be at least 1 ms and at most %d ms", ms, int64(math.MaxInt32))
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// WaitMillis converts the wait limit of GetName in milliseconds, as the C
// ABI and Python give it, into the timeout GetName takes: a negative ms is
// no limit (-1), more than 2^31-1 is Invalid (so no value can overflow the
// conversion or turn into "no limit" or "at once").
func WaitMillis(ms int64) (time.Duration, error) {
	switch {
	case ms < 0:
		return -1, nil
	case ms > math.MaxInt32:
		return 0, status.Errorf(status.Invalid,
			"wait timeout %d ms out of range: at most %d ms, or negative for no limit", ms, int64(math.MaxInt32))
	}
	return time.Duration(ms) * time.Millisecond, nil
}

// SetTimeout sets how long any later call may wait for the daemon before
// it fails with Timeout (see the top of this file): each blocking read and
// write of a call waits at most d. d must lie in [1 ms, MaxTimeout], else the
// error is Invalid and nothing changes. It waits for an exchange in progress
// on another goroutine to end. A closed or lost client returns its error.
func (c *Client) SetTimeout(d time.Duration) error {
	if err := checkTimeout(d); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.usableLocked(); err != nil {
		return err
	}
	if err := c.w.conn.SetTimeout(d); err != nil {
		return c.w.lose(err)
	}
	c.timeout.Store(int64(d))
	return nil
}

// Timeout returns the client's timeout (DefaultTimeout unless set). It never
// waits behind an exchange.
func (c *Client) Timeout() time.Duration { return time.Duration(c.timeout.Load()) }
