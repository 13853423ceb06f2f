// Command v6d-etcd runs a single-member etcd on free 127.0.0.1 ports for
// tests and demos (Python and C suites, make cluster-demo): it prints
// "ETCD_ENDPOINT=http://127.0.0.1:PORT" on stdout once etcd is ready, and
// runs until SIGINT or SIGTERM. With no -data-dir, the data lives in a
// temporary directory removed at exit; with -data-dir and -port, a test can
// stop it and start it again where its clients expect it.
//
// It also takes the flags vineyardd's --etcd_cmd launches etcd with
// (internal/etcdlaunch): --listen-client-urls and --listen-peer-urls give
// the ports (on 127.0.0.1 or localhost only), and --name, the advertised
// URLs and --initial-cluster* are accepted for a single member and
// otherwise unused.
package main

import (
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/v6d-io/v6d-go/internal/etcdtest"
)

func main() {
	dir := flag.String("data-dir", "", "etcd's data directory (default: a temporary one, removed at exit)")
	endpointFile := flag.String("endpoint-file", "", "also write the client URL to this file once ready")
	clientPort := flag.Int("port", 0, "client port on 127.0.0.1 (default: a free one)")
	peerPort := flag.Int("peer-port", 0, "peer port on 127.0.0.1 (default: a free one)")
	clientURL := flag.String("listen-client-urls", "", "as etcd's: http://127.0.0.1:PORT (sets -port)")
	peerURL := flag.String("listen-peer-urls", "", "as etcd's: http://127.0.0.1:PORT (sets -peer-port)")
	for _, unused := range []string{"name", "advertise-client-urls", "initial-advertise-peer-urls", "initial-cluster",
		"initial-cluster-state"} {
		flag.String(unused, "", "as etcd's; a single member needs none of it")
	}
	flag.Parse()
	for _, u := range []struct {
		url  string
		port *int
	}{{*clientURL, clientPort}, {*peerURL, peerPort}} {
		if u.url == "" {
			continue
		}
		p, err := localPort(u.url)
		if err != nil {
			fmt.Fprintln(os.Stderr, "v6d-etcd:", err)
			os.Exit(2)
		}
		*u.port = p
	}
	if err := run(*dir, *endpointFile, *clientPort, *peerPort); err != nil {
		fmt.Fprintln(os.Stderr, "v6d-etcd:", err)
		os.Exit(1)
	}
}

// localPort returns the port of a single http://127.0.0.1:PORT or
// http://localhost:PORT URL.
func localPort(s string) (int, error) {
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "http" || (u.Hostname() != "127.0.0.1" && u.Hostname() != "localhost") {
		return 0, fmt.Errorf("%q: want one http://127.0.0.1:PORT URL", s)
	}
	return strconv.Atoi(u.Port())
}

func run(dir, endpointFile string, clientPort, peerPort int) error {
	if dir == "" {
		tmp, err := os.MkdirTemp("", "v6d-etcd-")
		if err != nil {
			return err
		}
		defer func() { _ = os.RemoveAll(tmp) }()
		dir = tmp
	}
	srv, err := etcdtest.StartAt(dir, clientPort, peerPort)
	if err != nil {
		return err
	}
	defer srv.Stop()
	if endpointFile != "" {
		if err := os.WriteFile(endpointFile, []byte(srv.Endpoint()+"\n"), 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("ETCD_ENDPOINT=%s\n", srv.Endpoint())
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	select {
	case <-sig:
		return nil
	case err := <-srv.Err():
		return err
	}
}
