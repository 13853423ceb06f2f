// Command vineyardd is the Vineyard daemon: it parses flags (one table,
// flags.go), checks the arena size against the machine's memory, starts
// server.Start and waits for SIGINT/SIGTERM.
package main

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/v6d-io/v6d-go/internal/server"
	"github.com/v6d-io/v6d-go/internal/shm"
)

// version is set at build time from the VERSION file:
// go build -ldflags "-X main.version=$(cat VERSION)".
var version = "dev"

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the daemon with its arguments; it returns the exit status: 0, 1 for
// a failure to start or stop, 2 for bad usage.
func run(args []string, stdout, stderr io.Writer) int {
	o, err := parseArgs(args)
	switch {
	case errors.Is(err, errHelp):
		usage(stdout)
		return 0
	case errors.Is(err, errVersion):
		fmt.Fprintf(stdout, "vineyardd %s\n", version)
		return 0
	case err != nil:
		fmt.Fprintf(stderr, "vineyardd: %v\nRun 'vineyardd --help' for the flags.\n", err)
		return 2
	}
	if err := shm.CheckSize(o.size, o.reserve, o.allowOvercommit, shm.ReadMemory()); err != nil {
		fmt.Fprintf(stderr, "vineyardd: %v\n", err)
		return 1
	}
	if o.socket == "" {
		o.socket = server.DefaultSocket()
	}
	rpcEndpoint := ""
	if o.rpc {
		rpcEndpoint = net.JoinHostPort(o.rpcHost, strconv.Itoa(o.rpcPort))
	}
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: o.logLevel}))
	server.SpareProcs()
	srv, err := server.Start(server.Config{
		Socket:           o.socket,
		SocketMode:       o.socketMode,
		Size:             o.size,
		ReserveMemory:    o.reserve,
		PrefaultAhead:    o.prefaultAhead,
		SchedBatch:       o.schedBatch,
		DirectoryEntries: o.dirEntries,
		Meta:             o.meta,
		InstanceID:       o.instanceID,
		Logger:           logger,

		EtcdEndpoints: o.etcdEndpoints,
		EtcdPrefix:    o.etcdPrefix,
		EtcdTimeout:   o.etcdTimeout,
		EtcdLeaseTTL:  o.etcdLeaseTTL,

		MaxConnections:   o.maxConnections,
		MaxInflightBytes: int64(o.maxInflightBytes),
		MaxReplyBytes:    int(o.maxReplyBytes),
		FrameTimeout:     o.frameTimeout,

		RPCEndpoint: rpcEndpoint,
		RPCSecret:   o.rpcSecret,
		RPCInsecure: o.rpcInsecure,

		PeerEndpoint: o.peer.endpoint(o.meta),
		PeerSecret:   o.peer.secret,
		PeerTLS:      o.peer.tls,
	})
	if err != nil {
		fmt.Fprintf(stderr, "vineyardd: %v\n", err)
		return 1
	}
	broken := make(chan error, 1)
	if o.checkInvariants > 0 {
		go checkInvariants(srv, o.checkInvariants, broken)
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	select {
	case sig := <-sigs:
		logger.Info("signal received, stopping", "signal", sig.String())
	case <-srv.Done():
	case err := <-broken:
		logger.Error("store invariant broken, stopping", "err", err)
		_ = srv.Close()
		fmt.Fprintf(stderr, "vineyardd: store invariant broken: %v\n", err)
		return 3
	}
	if err := srv.Close(); err != nil {
		fmt.Fprintf(stderr, "vineyardd: %v\n", err)
		return 1
	}
	return 0
}

// checkInvariants checks the store's bookkeeping every interval until the
// server stops, and reports the first violation on broken.
func checkInvariants(srv *server.Server, every time.Duration, broken chan<- error) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-srv.Done():
			return
		case <-t.C:
			if err := srv.Store().CheckInvariants(); err != nil {
				broken <- err
				return
			}
		}
	}
}
