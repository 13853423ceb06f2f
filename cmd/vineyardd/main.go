// Command vineyardd is the Vineyard daemon: it parses flags (one table,
// flags.go, writing server.Config's fields), starts server.Start and waits
// for SIGINT/SIGTERM.
package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"syscall"
	"time"

	"github.com/v6d-io/v6d-go/internal/gctune"
	"github.com/v6d-io/v6d-go/internal/server"
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
	logger, logFile, err := newLogger(&o, stderr)
	if err != nil {
		fmt.Fprintf(stderr, "vineyardd: %v\n", err)
		return 1
	}
	defer logFile.Close()
	o.Logger = logger
	for _, w := range o.warnings {
		logger.Warn("upstream flag accepted but not supported here: " + w)
	}
	if o.coredump {
		debug.SetTraceback("crash")
	}
	server.SpareProcs()
	gctune.Start()
	srv, err := server.Start(o.Config)
	if err != nil {
		fmt.Fprintf(stderr, "vineyardd: %v\n", err)
		return 1
	}
	sigs := make(chan os.Signal, 1) // before announcing: whoever waits for it may signal next
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	defer signal.Stop(sigs)
	if err := announceReady(srv, o.readyFD); err != nil {
		logger.Warn("readiness not announced", "err", err)
	}
	broken := make(chan error, 1)
	if o.checkInvariants > 0 {
		go checkInvariants(srv, o.checkInvariants, broken)
	}
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
	_ = sdNotify("STOPPING=1")
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
