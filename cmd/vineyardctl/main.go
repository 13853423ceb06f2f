// Command vineyardctl is the command-line client of vineyardd: it lists,
// inspects, gets, puts, deletes and watches objects, and reports the
// daemon's status. Everything is in internal/ctl; `vineyardctl help` lists
// the commands and the exit codes.
package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/v6d-io/v6d-go/internal/ctl"
)

var version = "dev"

func main() {
	ctl.Version = version
	stop := make(chan struct{})
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		close(stop)
		signal.Stop(sig) // a second signal ends the process at once
	}()
	os.Exit(ctl.Main(os.Args[1:], os.Stdout, os.Stderr, stop))
}
