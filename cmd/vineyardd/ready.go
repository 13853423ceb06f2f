package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"

	"github.com/v6d-io/v6d-go/internal/server"
)

// readyInfo is what the daemon announces once every listener accepts
// connections: after "READY " on the --ready-fd line, as JSON.
type readyInfo struct {
	Socket      string `json:"socket"`
	RPCEndpoint string `json:"rpc_endpoint,omitempty"`
	Instance    uint64 `json:"instance_id"`
	PID         int    `json:"pid"`
}

// announceReady tells whoever started the daemon that it serves: one line
// "READY {json}\n" written to fd (then closed) when fd >= 0, and READY=1 to
// the service manager when NOTIFY_SOCKET is set (sd_notify). A daemon that
// fails to start writes nothing and exits, so the reader of the fd sees end
// of file instead of a line. Errors are for the log: the daemon serves
// anyway.
func announceReady(srv *server.Server, fd int) error {
	var errs []string
	if fd >= 0 {
		if err := writeReady(srv, fd); err != nil {
			errs = append(errs, err.Error())
		}
	}
	if err := sdNotify("READY=1\nMAINPID=" + fmt.Sprint(os.Getpid())); err != nil {
		errs = append(errs, err.Error())
	}
	if len(errs) > 0 {
		return fmt.Errorf("announcing readiness: %s", strings.Join(errs, "; "))
	}
	return nil
}

func writeReady(srv *server.Server, fd int) error {
	f := os.NewFile(uintptr(fd), "ready-fd")
	if f == nil {
		return fmt.Errorf("--ready-fd %d is not open", fd)
	}
	defer f.Close()
	info, err := json.Marshal(readyInfo{Socket: srv.Socket(), RPCEndpoint: srv.RPCEndpoint(),
		Instance: srv.Store().InstanceID(), PID: os.Getpid()})
	if err != nil {
		return err
	}
	if _, err := f.Write(append(append([]byte("READY "), info...), '\n')); err != nil {
		return fmt.Errorf("--ready-fd %d: %w", fd, err)
	}
	return nil
}

// sdNotify sends state to the service manager's NOTIFY_SOCKET (a datagram
// socket; a leading '@' names an abstract one), as sd_notify(3) does; it
// does nothing when the variable is not set.
func sdNotify(state string) error {
	path := os.Getenv("NOTIFY_SOCKET")
	if path == "" {
		return nil
	}
	if path[0] == '@' {
		path = "\x00" + path[1:]
	}
	c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return fmt.Errorf("NOTIFY_SOCKET: %w", err)
	}
	defer c.Close()
	if _, err := c.Write([]byte(state)); err != nil {
		return fmt.Errorf("NOTIFY_SOCKET: %w", err)
	}
	return nil
}
