package client

import (
	"errors"
	"fmt"
	"math"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/v6d-io/v6d-go/internal/server"
	"github.com/v6d-io/v6d-go/internal/status"
)

// daemonEnv makes the test binary run a daemon on the socket it names
// instead of the tests: a real daemon in a process of its own, which a test
// can stop with SIGSTOP.
const daemonEnv = "V6D_CLIENT_TEST_DAEMON"

func TestMain(m *testing.M) {
	if sock := os.Getenv(daemonEnv); sock != "" {
		srv, err := server.Start(server.Config{Socket: sock, Size: 16 << 20})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		<-srv.Ready()
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGTERM)
		<-ch
		_ = srv.Close()
		os.Exit(0)
	}
	if sock := os.Getenv(writerEnv); sock != "" {
		os.Exit(runWriter(sock))
	}
	os.Exit(m.Run())
}

// startDaemonProcess runs a real daemon in a child process and returns its
// socket and process; the daemon is killed at the end of the test.
func startDaemonProcess(t *testing.T) (string, *os.Process) {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "d.sock")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), daemonEnv+"="+sock)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGCONT)
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	for range 1000 {
		if c, err := net.Dial("unix", sock); err == nil {
			_ = c.Close()
			return sock, cmd.Process
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("the daemon process did not start")
	return "", nil
}

// stopProcess sends SIGSTOP to p and waits until every thread of it has
// stopped: the signal reaches one thread first, and until it spreads another
// thread may still serve a request.
func stopProcess(t *testing.T, p *os.Process) {
	t.Helper()
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	dir := fmt.Sprintf("/proc/%d/task", p.Pid)
	for range 6000 {
		tasks, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		stopped := 0
		for _, task := range tasks {
			stat, err := os.ReadFile(filepath.Join(dir, task.Name(), "stat"))
			if err != nil {
				stopped++ // the thread exited
				continue
			}
			// pid (comm) state ...: comm may hold spaces and parentheses.
			rest := stat[strings.LastIndexByte(string(stat), ')')+1:]
			if f := strings.Fields(string(rest)); len(f) > 0 && (f[0] == "T" || f[0] == "t") {
				stopped++
			}
		}
		if stopped == len(tasks) {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatal("the daemon's threads did not stop")
}

// silentListener accepts connections on a temp socket and never answers.
func silentListener(t *testing.T) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), "silent.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns = append(conns, c)
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		<-done
		for _, c := range conns {
			_ = c.Close()
		}
	})
	return sock
}

func TestTimeoutRange(t *testing.T) {
	c := connect(t, startServer(t, 1<<20))
	if got := c.Timeout(); got != DefaultTimeout {
		t.Fatalf("default timeout %v, want %v", got, DefaultTimeout)
	}
	for _, d := range []time.Duration{0, -time.Second, time.Millisecond - 1, MaxTimeout + time.Millisecond, math.MaxInt64} {
		if err := c.SetTimeout(d); code(err) != status.Invalid || !strings.Contains(err.Error(), "out of range") {
			t.Errorf("SetTimeout(%v) = %v, want Invalid", d, err)
		}
		if _, err := Connect(c.Socket(), WithTimeout(d)); code(err) != status.Invalid {
			t.Errorf("Connect(WithTimeout(%v)) = %v, want Invalid", d, err)
		}
	}
	if got := c.Timeout(); got != DefaultTimeout {
		t.Fatalf("a refused timeout changed it to %v", got)
	}
	for _, d := range []time.Duration{time.Millisecond, MaxTimeout, 2 * time.Second} {
		if err := c.SetTimeout(d); err != nil || c.Timeout() != d {
			t.Errorf("SetTimeout(%v) = %v, Timeout() = %v", d, err, c.Timeout())
		}
	}
	if _, err := c.Exists(1); err != nil {
		t.Fatalf("call after SetTimeout: %v", err)
	}
	d, err := Connect(c.Socket(), WithTimeout(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.Timeout() != time.Second {
		t.Fatalf("WithTimeout: Timeout() = %v", d.Timeout())
	}

	for _, tc := range []struct {
		ms   int64
		want time.Duration // 0: Invalid
	}{
		{0, 0}, {-1, 0}, {math.MaxInt32 + 1, 0}, {1 << 62, 0}, {math.MinInt64, 0},
		{1, time.Millisecond}, {math.MaxInt32, MaxTimeout},
	} {
		got, err := MillisTimeout(tc.ms)
		if (tc.want == 0) != (code(err) == status.Invalid) || got != tc.want {
			t.Errorf("MillisTimeout(%d) = %v, %v; want %v", tc.ms, got, err, tc.want)
		}
	}
	for _, tc := range []struct {
		ms   int64
		want time.Duration // 0 with ms > 0: Invalid
	}{
		{-1, -1}, {math.MinInt64, -1}, {0, 0}, {250, 250 * time.Millisecond},
		{math.MaxInt32, MaxTimeout}, {math.MaxInt32 + 1, 0}, {1 << 62, 0}, {1e13, 0},
	} {
		got, err := WaitMillis(tc.ms)
		invalid := tc.ms > 0 && tc.want == 0
		if invalid != (code(err) == status.Invalid) || got != tc.want {
			t.Errorf("WaitMillis(%d) = %v, %v; want %v", tc.ms, got, err, tc.want)
		}
	}
}

// TestGetNameWaitRange: the overflowing waits of issue 14 (2^62 ms timed
// out at once, 10^13 ms waited forever) are refused, and a wait longer than
// the client's timeout still gets its answer: the timeout stretches.
func TestGetNameWaitRange(t *testing.T) {
	c := connect(t, startServer(t, 1<<20))
	for _, d := range []time.Duration{MaxTimeout + time.Millisecond, math.MaxInt64} {
		if _, err := c.GetName("x", true, d); code(err) != status.Invalid {
			t.Errorf("GetName(wait %v) = %v, want Invalid", d, err)
		}
	}
	if err := c.SetTimeout(250 * time.Millisecond); err != nil {
		t.Fatal(err)
	}
	// The daemon holds the request for the whole wait, longer than the
	// client's timeout: the call must end with the daemon's Timeout reply,
	// and the connection must stay usable.
	if _, err := c.GetName("never", true, 500*time.Millisecond); code(err) != status.Timeout {
		t.Fatalf("GetName(wait) = %v, want the daemon's Timeout", err)
	}
	if _, err := c.Exists(1); err != nil {
		t.Fatalf("connection unusable after a wait: %v", err)
	}
	if c.Timeout() != 250*time.Millisecond {
		t.Fatalf("timeout after a wait %v", c.Timeout())
	}
}

func TestConnectToSilentDaemonTimesOut(t *testing.T) {
	sock := silentListener(t)
	_, err := Connect(sock, WithTimeout(100*time.Millisecond))
	if code(err) != status.ConnectionFailed || !strings.Contains(err.Error(), "did not reply within 100ms") {
		t.Fatalf("Connect = %v, want ConnectionFailed naming the timeout", err)
	}
}

// TestCallToStoppedDaemonTimesOut stops a real daemon with SIGSTOP: the next
// call fails with Timeout, every later one at once with ConnectionError,
// and Close returns.
func TestCallToStoppedDaemonTimesOut(t *testing.T) {
	sock, proc := startDaemonProcess(t)
	c, err := Connect(sock, WithTimeout(500*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	id, bid := put(t, c, []byte("kept across the timeout"))
	stopProcess(t, proc)
	_, err = c.Exists(id)
	if code(err) != status.Timeout || !strings.Contains(err.Error(), "500ms") {
		t.Fatalf("call to a stopped daemon = %v, want Timeout", err)
	}
	for _, call := range []func() error{
		func() error { _, err := c.Exists(id); return err },
		func() error { _, err := c.GetName("x", true, time.Hour); return err },
		func() error { return c.SetTimeout(time.Second) },
	} {
		if err := call(); code(err) != status.ConnectionError || !strings.Contains(err.Error(), "earlier call") {
			t.Fatalf("call after a timeout = %v, want ConnectionError", err)
		}
	}
	// The connection stays open until Close: the blob the client created is
	// still its own and readable.
	if b, _, err := c.BlobPointer(bid); err != nil || string(b) != "kept across the timeout" {
		t.Fatalf("blob after a timeout: %q, %v", b, err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("Close after a timeout: %v", err)
	}

	// Connecting to the stopped daemon: the kernel accepts the connection,
	// the registration gets no reply.
	_, err = Connect(sock, WithTimeout(100*time.Millisecond))
	if code(err) != status.ConnectionFailed || !strings.Contains(err.Error(), "did not reply") {
		t.Fatalf("Connect to a stopped daemon = %v", err)
	}

	// Once resumed the daemon serves new clients.
	if err := proc.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	d, err := Connect(sock, WithTimeout(10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if ok, err := d.Exists(id); err != nil || !ok {
		t.Fatalf("Exists after SIGCONT = %v, %v", ok, err)
	}
}

// TestGetNameWaitToStoppedDaemonTimesOut: the stretched timeout of a wait
// still ends when the daemon is stopped.
func TestGetNameWaitToStoppedDaemonTimesOut(t *testing.T) {
	sock, proc := startDaemonProcess(t)
	c, err := Connect(sock, WithTimeout(300*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	stopProcess(t, proc)
	_, err = c.GetName("never", true, 200*time.Millisecond)
	if code(err) != status.Timeout || !strings.Contains(err.Error(), "500ms") {
		t.Fatalf("GetName(wait) to a stopped daemon = %v, want Timeout after 500ms", err)
	}
	if !errors.Is(c.w.lost, &status.Error{Code: status.ConnectionError}) {
		t.Fatalf("connection not marked lost: %v", c.w.lost)
	}
}
