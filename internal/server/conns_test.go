package server

import (
	"bufio"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/status"
)

// startCfg starts a server with cfg on a temp socket (unless cfg names
// one) and closes it when the test ends: the tests' one way to start a
// server (internal/servertest is the same for other packages).
func startCfg(t testing.TB, cfg Config) *Server {
	t.Helper()
	if cfg.Socket == "" {
		dir, err := os.MkdirTemp("", "v6d-srv-")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
		cfg.Socket = filepath.Join(dir, "s.sock")
	}
	if cfg.Size == 0 {
		cfg.Size = 4 << 20
	}
	s, err := Start(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	<-s.Ready()
	return s
}

// eventually fails the test unless cond holds within 20 s (a bound for
// hangs, not a timing assertion).
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(20 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// padded returns an exists request of exactly n bytes.
func padded(n int) []byte {
	head := `{"type":"exists_request","id":1,"pad":"`
	body := []byte(head + strings.Repeat("x", n-len(head)-2) + `"}`)
	return body
}

// recvUntilClosed reads replies until the server closes the connection and
// returns them; it fails the test if the connection stays open for 20 s.
func recvUntilClosed(t *testing.T, c net.Conn) []map[string]any {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	var got []map[string]any
	for {
		body, err := protocol.ReadFrame(c, nil, 1<<20)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("the server did not close the connection")
			}
			return got
		}
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			t.Fatal(err)
		}
		got = append(got, m)
	}
}

// TestParkedConnectionResumes: a connection idle past ParkAfter is parked
// (its goroutine waits on the poller) and served again when it sends; the
// server closes with connections parked.
func TestParkedConnectionResumes(t *testing.T) {
	s := startCfg(t, Config{ParkAfter: 10 * time.Millisecond})
	r := dial(t, s)
	r.rpc(`{"type":"register_request","version":"0.24.0"}`)
	eventually(t, "the connection to park", func() bool { return s.poller.parked.Load() == 1 })
	if n := s.poller.held.Load(); n != 0 {
		t.Errorf("an idle parked connection holds %d bytes of buffers", n)
	}
	for i := 0; i < 3; i++ {
		if m := r.rpc(`{"type":"exists_request","id":1}`); m["type"] != "exists_reply" {
			t.Fatalf("after parking: %v", m)
		}
		eventually(t, "the connection to park again", func() bool { return s.poller.parked.Load() == 1 })
	}
	// A frame split across a park: the header now, the body later.
	body := []byte(`{"type":"exists_request","id":2}`)
	frame := protocol.AppendFrame(nil, body)
	parks := s.poller.parks.Load()
	if _, err := r.c.Write(frame[:12]); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the connection to park mid-frame", func() bool {
		return s.poller.parks.Load() > parks && s.poller.parked.Load() == 1
	})
	if n := s.poller.held.Load(); n != 4 {
		t.Errorf("a connection parked with 4 bytes of a frame holds %d bytes of buffers", n)
	}
	if _, err := r.c.Write(frame[12:]); err != nil {
		t.Fatal(err)
	}
	if m := r.recv(); m["type"] != "exists_reply" {
		t.Fatalf("split frame: %v", m)
	}
	eventually(t, "the connection to park", func() bool { return s.poller.parked.Load() == 1 })
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := protocol.ReadFrame(r.c, nil, 1<<20); err == nil {
		t.Fatal("connection open after Close")
	}
}

// TestConnectionCap: a connection over MaxConnections gets an error frame
// and is closed; the others are served, and a slot freed is usable again.
func TestConnectionCap(t *testing.T) {
	s := startCfg(t, Config{MaxConnections: 2})
	a, b := dial(t, s), dial(t, s)
	a.rpc(`{"type":"register_request"}`)
	b.rpc(`{"type":"register_request"}`)
	c := dial(t, s)
	got := recvUntilClosed(t, c.c)
	if len(got) != 1 || got[0]["code"] != float64(status.ConnectionError) || !strings.Contains(got[0]["message"].(string), "too many connections") {
		t.Fatalf("refused connection got %v", got)
	}
	if m := a.rpc(`{"type":"exists_request","id":1}`); m["type"] != "exists_reply" {
		t.Fatalf("first connection after refusal: %v", m)
	}
	_ = b.c.Close()
	eventually(t, "the closed connection to go", func() bool { return s.connections() == 1 })
	d := dial(t, s)
	if m := d.rpc(`{"type":"register_request"}`); m["type"] != "register_reply" {
		t.Fatalf("connection after one closed: %v", m)
	}
}

// TestInflightBudget: a frame that would take the bytes being received over
// MaxInflightBytes is drained and refused with NotEnoughMemory, its
// connection stays in step, and the budget is back to zero at the end.
func TestInflightBudget(t *testing.T) {
	s := startCfg(t, Config{MaxFrame: 1 << 20, MaxInflightBytes: 256 << 10})
	a, b := dial(t, s), dial(t, s)
	a.rpc(`{"type":"register_request"}`)
	b.rpc(`{"type":"register_request"}`)

	// a: 200 KiB announced, all but 10 bytes sent: its buffer holds ~200 KiB.
	big := protocol.AppendFrame(nil, padded(200<<10))
	if _, err := a.c.Write(big[:len(big)-10]); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a's frame to be charged", func() bool { return s.inflight.Load() >= 190<<10 })

	// b: the same frame does not fit; it is drained and refused.
	b.send(string(padded(200 << 10)))
	if m := b.recv(); m["code"] != float64(status.NotEnoughMemory) {
		t.Fatalf("over budget: %v", m)
	}
	if m := b.rpc(`{"type":"exists_request","id":1}`); m["type"] != "exists_reply" {
		t.Fatalf("after a refused frame: %v", m)
	}
	// a finishes; then b's frame fits.
	if _, err := a.c.Write(big[len(big)-10:]); err != nil {
		t.Fatal(err)
	}
	if m := a.recv(); m["type"] != "exists_reply" {
		t.Fatalf("a's frame: %v", m)
	}
	eventually(t, "a's charge to be released", func() bool { return s.inflight.Load() == 0 })
	if m := b.rpc(string(padded(200 << 10))); m["type"] != "exists_reply" {
		t.Fatalf("b's frame within budget: %v", m)
	}
	eventually(t, "the budget to be free", func() bool { return s.inflight.Load() == 0 })

	// A lying length prefix is charged for the bytes that came, not the
	// announced size, and released when the client goes away.
	c := dial(t, s)
	var hdr [8]byte
	binary.LittleEndian.PutUint64(hdr[:], 1<<20)
	if _, err := c.c.Write(append(hdr[:], `{"type":`...)); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the lying frame to be charged", func() bool { return s.inflight.Load() > 0 })
	if n := s.inflight.Load(); n > 2*readBufSize {
		t.Fatalf("a frame with 8 bytes received is charged %d bytes", n)
	}
	_ = c.c.Close()
	eventually(t, "the budget to be free", func() bool { return s.inflight.Load() == 0 })
}

// TestLargeFrameAfterALarger: a large frame read into the body buffer an
// earlier, larger frame left (its capacity beyond the frame) takes exactly
// its own bytes, not the start of the request written after it in the same
// write: both are answered. (The read once filled the buffer to its
// capacity, swallowing the request after it, which was then never answered
// and its client waited forever.)
func TestLargeFrameAfterALarger(t *testing.T) {
	s := startCfg(t, Config{MaxFrame: 1 << 20})
	r := dial(t, s)
	r.rpc(`{"type":"register_request"}`)
	if m := r.rpc(string(padded(300 << 10))); m["type"] != "exists_reply" {
		t.Fatalf("the larger frame: %v", m)
	}
	for _, size := range []int{100 << 10, 70 << 10, 299 << 10} {
		two := protocol.AppendFrame(nil, padded(size))
		two = protocol.AppendFrame(two, []byte(`{"type":"exists_request","id":2}`))
		r.sendRaw(two)
		for i := range 2 {
			if m := r.recv(); m["type"] != "exists_reply" {
				t.Fatalf("%d-byte frame then a small one: reply %d is %v", size, i, m)
			}
		}
	}
}

// TestFramesInAnyCut: requests of every size class (small, about the read
// buffer's size, several times it), written back to back in chunks cut at
// random points, with pauses that let the connection park between chunks,
// are each answered once, in order: no read takes bytes of the next frame
// or loses bytes across a park.
func TestFramesInAnyCut(t *testing.T) {
	s := startCfg(t, Config{MaxFrame: 1 << 20, ParkAfter: time.Millisecond})
	r := dial(t, s)
	r.rpc(`{"type":"register_request"}`)
	rng := rand.New(rand.NewPCG(15, 7))
	const frames = 300
	var stream []byte
	for range frames {
		var size int
		switch rng.IntN(3) {
		case 0:
			size = 64 + rng.IntN(2000)
		case 1:
			size = readBufSize - 2000 + rng.IntN(4000)
		default:
			size = readBufSize + rng.IntN(900<<10)
		}
		stream = protocol.AppendFrame(stream, padded(size))
	}
	wrote := make(chan error, 1)
	go func() {
		for b := stream; len(b) > 0; {
			n := min(len(b), 1+rng.IntN(256<<10))
			if _, err := r.c.Write(b[:n]); err != nil {
				wrote <- err
				return
			}
			b = b[n:]
			if rng.IntN(8) == 0 {
				time.Sleep(3 * time.Millisecond) // the connection parks
			}
		}
		wrote <- nil
	}()
	for i := range frames {
		if m := r.recv(); m["type"] != "exists_reply" {
			t.Fatalf("reply %d of %d: %v", i, frames, m)
		}
	}
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	if m := r.rpc(`{"type":"exists_request","id":1}`); m["type"] != "exists_reply" {
		t.Fatalf("after the stream: %v", m)
	}
}

// TestFrameTimeout: half a frame is given FrameTimeout, then an error reply
// and the connection closes; an idle connection between frames is not
// timed out.
func TestFrameTimeout(t *testing.T) {
	s := startCfg(t, Config{FrameTimeout: 200 * time.Millisecond, ParkAfter: 20 * time.Millisecond})
	idle := dial(t, s)
	idle.rpc(`{"type":"register_request"}`)
	for _, partial := range [][]byte{
		{1, 0, 0}, // half a length prefix
		protocol.AppendFrame(nil, []byte(`{"type":"exists_request","id":1}`))[:20],        // half a body
		protocol.AppendFrame(nil, padded(200<<10))[:100<<10],                              // half a large body
		append(protocol.AppendFrame(nil, []byte(`{"type":"register_request"}`)), 9, 0, 0), // a whole frame, then half
	} {
		r := dial(t, s)
		if _, err := r.c.Write(partial); err != nil {
			t.Fatal(err)
		}
		got := recvUntilClosed(t, r.c)
		last := got[len(got)-1]
		if last["code"] != float64(status.Invalid) || !strings.Contains(last["message"].(string), "not complete") {
			t.Fatalf("timed-out frame: replies %v", got)
		}
	}
	if m := idle.rpc(`{"type":"exists_request","id":1}`); m["type"] != "exists_reply" {
		t.Fatalf("idle connection: %v", m)
	}
	eventually(t, "connections to close", func() bool { return s.connections() == 1 })
}

// TestClientThatNeverReads: replies to a client that stops reading block
// the daemon's writes at most FrameTimeout; then the connection closes.
func TestClientThatNeverReads(t *testing.T) {
	s := startCfg(t, Config{FrameTimeout: 200 * time.Millisecond})
	r := dial(t, s)
	r.rpc(`{"type":"register_request"}`)
	var batch []byte
	for i := 0; i < 1000; i++ {
		batch = protocol.AppendFrame(batch, []byte(`{"type":"instance_status_request"}`))
	}
	_ = r.c.SetWriteDeadline(time.Now().Add(20 * time.Second))
	for {
		if _, err := r.c.Write(batch); err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("the daemon kept its thread blocked writing to a client that never reads")
			}
			break // closed by the daemon
		}
	}
	eventually(t, "the connection to close", func() bool { return s.connections() == 0 })
}

// childDaemonEnv names the socket a re-executed test binary serves.
const childDaemonEnv = "V6D_TEST_CHILD_DAEMON"

// runChildDaemon serves cfg's socket until stdin closes.
func runChildDaemon(t *testing.T, socket string) {
	s, err := Start(Config{Socket: socket, Size: 1 << 20, ParkAfter: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = s.Close()
}

// threads returns the thread count of process pid.
func threads(t *testing.T, pid int) int {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Threads:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatal("no Threads: line")
	return 0
}

// rawClient is a blocking client socket that holds no goroutine or thread
// of the test while idle.
type rawClient int

func dialRaw(t *testing.T, path string) rawClient {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	tv := unix.NsecToTimeval(int64(30 * time.Second))
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &tv)
	if err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	return rawClient(fd)
}

func (c rawClient) Read(p []byte) (int, error) {
	n, err := unix.Read(int(c), p)
	for err == unix.EINTR { // SO_RCVTIMEO: a signal (Go's preemption) ends the read even with SA_RESTART
		n, err = unix.Read(int(c), p)
	}
	if n == 0 && err == nil {
		return 0, io.EOF
	}
	return max(n, 0), err
}

func (c rawClient) rpc(t *testing.T, body string) map[string]any {
	if _, err := unix.Write(int(c), protocol.AppendFrame(nil, []byte(body))); err != nil {
		t.Fatal(err)
	}
	return c.recv(t)
}

func (c rawClient) recv(t *testing.T) map[string]any {
	body, err := protocol.ReadFrame(c, nil, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(body, &m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestIdleConnectionsHoldNoThread: idleConns registered, idle connections
// (10,000; fewer under the race detector, which limits goroutines) cost the
// daemon no thread each: it stays up with a small thread count and serves
// new and old clients. The daemon runs in a child process (this test
// binary, re-executed) so that its threads can be counted.
func TestIdleConnectionsHoldNoThread(t *testing.T) {
	if sock := os.Getenv(childDaemonEnv); sock != "" {
		runChildDaemon(t, sock)
		return
	}
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur < lim.Max {
		lim.Cur = lim.Max
		if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
			t.Fatal(err)
		}
	}
	if lim.Cur < idleConns+500 {
		t.Skipf("RLIMIT_NOFILE %d is too low for %d connections", lim.Cur, idleConns)
	}
	dir := t.TempDir()
	sock := filepath.Join(dir, "s.sock")
	cmd := exec.Command(os.Args[0], "-test.run=^TestIdleConnectionsHoldNoThread$")
	cmd.Env = append(os.Environ(), childDaemonEnv+"="+sock)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	out := bufio.NewReader(stdout)
	for {
		line, err := out.ReadString('\n')
		if err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			t.Fatalf("child daemon did not start: %v", err)
		}
		if line == "ready\n" {
			break
		}
	}
	exited := make(chan error, 1)
	go func() {
		_, _ = io.Copy(io.Discard, out)
		exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		_ = stdin.Close()
		select {
		case err := <-exited:
			if err != nil {
				t.Errorf("child daemon: %v", err)
			}
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
			t.Error("child daemon did not stop")
		}
	})

	clients := make([]rawClient, 0, idleConns)
	defer func() {
		for _, c := range clients {
			_ = unix.Close(int(c))
		}
	}()
	register := protocol.AppendFrame(nil, []byte(`{"type":"register_request","version":"0.24.0"}`))
	for i := 0; i < idleConns; i++ {
		c := dialRaw(t, sock)
		clients = append(clients, c)
		if _, err := unix.Write(int(c), register); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range clients {
		if m := c.recv(t); m["type"] != "register_reply" {
			t.Fatalf("client %d: %v", i, m)
		}
	}
	time.Sleep(300 * time.Millisecond) // past ParkAfter: every connection parks
	n := threads(t, cmd.Process.Pid)
	t.Logf("%d idle connections: the daemon has %d threads", idleConns, n)
	if n >= 200 {
		t.Fatalf("%d idle connections: the daemon has %d threads", idleConns, n)
	}
	fresh := dialRaw(t, sock)
	defer func() { _ = unix.Close(int(fresh)) }()
	if m := fresh.rpc(t, `{"type":"register_request"}`); m["type"] != "register_reply" {
		t.Fatalf("new client: %v", m)
	}
	for _, i := range []int{0, idleConns / 2, idleConns - 1} {
		if m := clients[i].rpc(t, `{"type":"exists_request","id":1}`); m["type"] != "exists_reply" {
			t.Fatalf("idle client %d: %v", i, m)
		}
	}
	if n := threads(t, cmd.Process.Pid); n >= 200 {
		t.Fatalf("after serving: the daemon has %d threads", n)
	}
	select {
	case err := <-exited:
		t.Fatalf("daemon exited: %v", err)
	default:
	}
}

// TestMoreBusyConnectionsThanReaders: with more connections busy at once
// than blocking-reader slots, the ones without a slot read without blocking
// and park; every request still gets its reply, in order.
func TestMoreBusyConnectionsThanReaders(t *testing.T) {
	s := startCfg(t, Config{ParkAfter: time.Millisecond})
	const conns, calls = 3 * maxBlockingReaders, 20
	errs := make(chan error, conns)
	for i := 0; i < conns; i++ {
		go func() {
			c, err := net.Dial("unix", s.Socket())
			if err != nil {
				errs <- err
				return
			}
			defer func() { _ = c.Close() }()
			_ = c.SetDeadline(time.Now().Add(20 * time.Second))
			for j := 0; j < calls; j++ {
				req := `{"type":"register_request"}`
				if j > 0 {
					req = fmt.Sprintf(`{"type":"exists_request","id":%d}`, j)
				}
				if _, err := c.Write(protocol.AppendFrame(nil, []byte(req))); err != nil {
					errs <- err
					return
				}
				body, err := protocol.ReadFrame(c, nil, 1<<20)
				if err != nil {
					errs <- err
					return
				}
				want := `"exists_reply"`
				if j == 0 {
					want = `"register_reply"`
				}
				if !strings.Contains(string(body), want) {
					errs <- fmt.Errorf("call %d: %s", j, body)
					return
				}
			}
			errs <- nil
		}()
	}
	for i := 0; i < conns; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
