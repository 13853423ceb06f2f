// Command v6d-etcd runs a single-member etcd on free 127.0.0.1 ports for
// tests and demos (Python and C suites, make cluster-demo): it prints
// "ETCD_ENDPOINT=http://127.0.0.1:PORT" on stdout once etcd is ready, and
// runs until SIGINT or SIGTERM. With no -data-dir, the data lives in a
// temporary directory removed at exit; with -data-dir and -port, a test can
// stop it and start it again where its clients expect it.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/v6d-io/v6d-go/internal/etcdtest"
)

func main() {
	dir := flag.String("data-dir", "", "etcd's data directory (default: a temporary one, removed at exit)")
	endpointFile := flag.String("endpoint-file", "", "also write the client URL to this file once ready")
	clientPort := flag.Int("port", 0, "client port on 127.0.0.1 (default: a free one)")
	peerPort := flag.Int("peer-port", 0, "peer port on 127.0.0.1 (default: a free one)")
	flag.Parse()
	if err := run(*dir, *endpointFile, *clientPort, *peerPort); err != nil {
		fmt.Fprintln(os.Stderr, "v6d-etcd:", err)
		os.Exit(1)
	}
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
