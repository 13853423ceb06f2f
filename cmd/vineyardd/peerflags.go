package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/v6d-io/v6d-go/internal/peer"
)

// defaultPeerPort is the peer service's port unless --peer-port says
// otherwise: any free port. Peers find it in the etcd instance record, so no
// fixed port is needed, and several daemons of one host never collide.
const defaultPeerPort = 0

// peerOptions are the settings of the gRPC peer service (blob transfer
// between daemons, migrate). It runs with a cluster backend (--meta etcd),
// or whenever --peer-port is given.
type peerOptions struct {
	host   string // "" for 127.0.0.1
	port   int
	given  bool // --peer-port was given
	secret string
	tls    peer.TLSFiles
}

// endpoint is the "host:port" the peer service binds, or "" for none.
func (p peerOptions) endpoint(meta string) string {
	if meta == "local" && !p.given {
		return ""
	}
	host, port := p.host, p.port
	if host == "" {
		host = "127.0.0.1"
	}
	if !p.given {
		port = defaultPeerPort
	}
	return net.JoinHostPort(host, strconv.Itoa(port))
}

func init() {
	flags = append(flags,
		flagDef{"peer-port", "PORT", constant("0 (any free port)"),
			"TCP port of the gRPC peer service other daemons fetch blobs from (migrate), published\n" +
				"in the etcd instance record; it runs with --meta etcd, or with the flag given",
			func(o *options, v string) error {
				n, err := strconv.ParseUint(v, 10, 16)
				if err != nil {
					return fmt.Errorf("--peer-port %q is not a port number (0-65535)", v)
				}
				o.peer.port, o.peer.given = int(n), true
				return nil
			}},
		flagDef{"peer-host", "HOST", constant("127.0.0.1"),
			"address the peer service binds; any other than loopback needs --peer-secret-file or\n" +
				"--peer-tls-ca",
			func(o *options, v string) error { o.peer.host = v; return nil }},
		flagDef{"peer-secret-file", "FILE", constant("none"),
			"file holding the shared secret daemons present to each other's peer service",
			func(o *options, v string) error {
				b, err := os.ReadFile(v)
				if err != nil {
					return fmt.Errorf("--peer-secret-file: %w", err)
				}
				if o.peer.secret = strings.TrimSpace(string(b)); o.peer.secret == "" {
					return fmt.Errorf("--peer-secret-file %s is empty", v)
				}
				return nil
			}},
		flagDef{"peer-tls-cert", "FILE", constant("none"), "PEM certificate of the peer service (TLS)",
			func(o *options, v string) error { o.peer.tls.Cert = v; return nil }},
		flagDef{"peer-tls-key", "FILE", constant("none"), "PEM private key of --peer-tls-cert",
			func(o *options, v string) error { o.peer.tls.Key = v; return nil }},
		flagDef{"peer-tls-ca", "FILE", constant("none"),
			"PEM CA that signs the peers' certificates (mutual TLS)",
			func(o *options, v string) error { o.peer.tls.CA = v; return nil }},
	)
}
