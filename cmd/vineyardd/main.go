// Command vineyardd is the Vineyard daemon: it parses flags, starts
// server.Start and waits for SIGINT/SIGTERM.
package main

import (
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	"github.com/v6d-io/v6d-go/internal/server"
	"github.com/v6d-io/v6d-go/internal/shm"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	fs := flag.NewFlagSet("vineyardd", flag.ContinueOnError)
	var (
		socket   = fs.String("socket", server.DefaultSocket(), "IPC socket path")
		size     = fs.String("size", shm.FormatSize(shm.DefaultSize()), "shared memory size: bytes, or with a unit (512Mi, 4Gi, 2G)")
		reserve  = fs.Bool("reserve-memory", false, "pre-fault the whole arena at start")
		mode     = fs.String("socket-mode", "0600", "permission bits of the socket file (octal)")
		meta     = fs.String("meta", "local", "metadata backend: local")
		instance = fs.Uint64("instance-id", 0, "instance id of this daemon")
		logLevel = fs.String("log-level", "info", "log level: debug, info, warn, error")
	)
	fs.BoolVar(reserve, "reserve_memory", false, "alias of --reserve-memory (upstream spelling)")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "Usage: vineyardd [flags]\n\nFlags:\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	var level slog.Level
	if err := level.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(os.Stderr, "vineyardd: bad --log-level %q\n", *logLevel)
		return 2
	}
	bytes, err := shm.ParseSize(*size)
	if err != nil {
		fmt.Fprintf(os.Stderr, "vineyardd: bad --size: %v\n", err)
		return 2
	}
	perm, err := strconv.ParseUint(*mode, 8, 32)
	if err != nil {
		fmt.Fprintf(os.Stderr, "vineyardd: bad --socket-mode %q: %v\n", *mode, err)
		return 2
	}
	logger := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	srv, err := server.Start(server.Config{
		Socket:        *socket,
		SocketMode:    os.FileMode(perm),
		Size:          bytes,
		ReserveMemory: *reserve,
		Meta:          *meta,
		InstanceID:    *instance,
		Logger:        logger,
	})
	if err != nil {
		fmt.Fprintf(os.Stderr, "vineyardd: %v\n", err)
		return 1
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	select {
	case sig := <-sigs:
		logger.Info("signal received, stopping", "signal", sig.String())
	case <-srv.Done():
	}
	if err := srv.Close(); err != nil {
		fmt.Fprintf(os.Stderr, "vineyardd: %v\n", err)
		return 1
	}
	return 0
}
