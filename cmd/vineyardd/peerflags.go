package main

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/v6d-io/v6d-go/internal/server"
)

// peerEndpoint is the "host:port" the peer service binds, or "" for none:
// it runs with a cluster backend (--meta etcd), on server.DefaultPeerEndpoint
// unless --peer-host or --peer-port say otherwise, or whenever --peer-port
// is given. Peers find its port in the etcd instance record, so the default
// is any free port, and several daemons of one host never collide.
func peerEndpoint(o *settings) string {
	switch {
	case o.Meta == "local" && !o.peerGiven:
		return ""
	case o.PeerEndpoint == "":
		return server.DefaultPeerEndpoint
	}
	return o.PeerEndpoint
}

// setPeer rewrites the host or the port of the peer endpoint.
func setPeer(o *settings, h, p string) {
	if o.PeerEndpoint == "" {
		o.PeerEndpoint = server.DefaultPeerEndpoint
	}
	if h == "" {
		h = host(o.PeerEndpoint)
	}
	if p == "" {
		p = port(o.PeerEndpoint)
	}
	o.PeerEndpoint = net.JoinHostPort(h, p)
}

func init() {
	flags = append(flags,
		flagDef{"peer-port", "PORT", func(*settings) string { return port(server.DefaultPeerEndpoint) + " (any free port)" },
			"TCP port of the gRPC peer service other daemons fetch blobs from (migrate), published\n" +
				"in the etcd instance record; it runs with --meta etcd, or with the flag given",
			func(o *settings, v string) error {
				n, err := strconv.ParseUint(v, 10, 16)
				if err != nil {
					return fmt.Errorf("--peer-port %q is not a port number (0-65535)", v)
				}
				setPeer(o, "", strconv.FormatUint(n, 10))
				o.peerGiven = true
				return nil
			}},
		flagDef{"peer-host", "HOST", func(*settings) string { return host(server.DefaultPeerEndpoint) },
			"address the peer service binds; any other than loopback needs --peer-secret-file or\n" +
				"--peer-tls-ca",
			func(o *settings, v string) error { setPeer(o, v, ""); return nil }},
		flagDef{"peer-secret-file", "FILE", constant("none"),
			"file holding the shared secret daemons present to each other's peer service; without it\n" +
				"(or --peer-tls-ca) only daemons of this machine run by the same user or root are served",
			func(o *settings, v string) error {
				b, err := os.ReadFile(v)
				if err != nil {
					return fmt.Errorf("--peer-secret-file: %w", err)
				}
				if o.PeerSecret = strings.TrimSpace(string(b)); o.PeerSecret == "" {
					return fmt.Errorf("--peer-secret-file %s is empty", v)
				}
				return nil
			}},
		flagDef{"peer-tls-cert", "FILE", constant("none"), "PEM certificate of the peer service (TLS)",
			func(o *settings, v string) error { o.PeerTLS.Cert = v; return nil }},
		flagDef{"peer-tls-key", "FILE", constant("none"), "PEM private key of --peer-tls-cert",
			func(o *settings, v string) error { o.PeerTLS.Key = v; return nil }},
		flagDef{"peer-tls-ca", "FILE", constant("none"),
			"PEM CA that signs the peers' certificates (mutual TLS)",
			func(o *settings, v string) error { o.PeerTLS.CA = v; return nil }},
	)
}
