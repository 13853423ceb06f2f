package server

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/v6d-io/v6d-go/internal/client"
	"github.com/v6d-io/v6d-go/internal/etcdtest"
	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/peer"
	"github.com/v6d-io/v6d-go/internal/peer/peerstore"
	"github.com/v6d-io/v6d-go/internal/peer/peertest"
	"github.com/v6d-io/v6d-go/internal/sockcred/othertest"
	"github.com/v6d-io/v6d-go/internal/status"
	"github.com/v6d-io/v6d-go/internal/store"
)

// Faults in the middle of a real daemon-to-daemon migrate: the owner daemon
// SIGKILLed, and the peer connection cut by a proxy. The object is large
// (faultSize) and the fault fires after faultAfter bytes went through, far
// less than the object: a migrate that finished before the fault would
// succeed, and the tests would fail.

const (
	faultSize  = 256 << 20
	faultAfter = 16 << 20
	// answerBound is how long the requesting client may wait for its error:
	// a guard against hangs (the failures are immediate), not a speed figure.
	answerBound = 90 * time.Second
)

// ownerEnv, when set in the environment of the test binary, makes it an
// owner daemon: "DIR ETCD_ENDPOINT SIZE SEED" starts a daemon of the test
// cluster with its socket in DIR, stores and persists a tensor of SIZE
// bytes (bigPattern of SEED), prints "<id> <peer endpoint>" and runs until
// killed.
const ownerEnv = "V6D_SERVER_TEST_OWNER"

func TestMain(m *testing.M) {
	othertest.Main()
	if v := os.Getenv(ownerEnv); v != "" {
		os.Exit(runOwner(v))
	}
	os.Exit(m.Run())
}

func runOwner(arg string) int {
	var dir, endpoint string
	var size, seed int
	if _, err := fmt.Sscan(arg, &dir, &endpoint, &size, &seed); err != nil {
		fmt.Fprintln(os.Stderr, "owner:", err)
		return 2
	}
	s, err := Start(clusterConfig(dir, endpoint, uint64(size)+16<<20))
	if err != nil {
		fmt.Fprintln(os.Stderr, "owner:", err)
		return 1
	}
	<-s.Ready()
	id, err := storeTensor(s, size, func(b []byte) { bigPattern(b, byte(seed)) })
	if err != nil {
		fmt.Fprintln(os.Stderr, "owner:", err)
		return 1
	}
	fmt.Println(id.String(), s.PeerEndpoint())
	select {}
}

// bigPattern fills b (whole MiBs) with pattern(seed, 1 MiB) repeated, each
// MiB stamped with its index so that a misplaced chunk shows; fast enough
// for hundreds of MiB under -race.
func bigPattern(b []byte, seed byte) {
	unit := pattern(seed, 1<<20)
	for off := 0; off < len(b); off += len(unit) {
		copy(b[off:], unit)
		b[off], b[off+1] = byte(off>>20), byte(off>>28)
	}
}

// startOwner runs the test binary as an owner daemon process of etcd's
// cluster and returns it, the id of its tensor and its peer endpoint.
func startOwner(t *testing.T, etcd *etcdtest.Server, size int, seed byte) (*exec.Cmd, ids.ObjectID, string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "v6d-owner-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	cmd, line := peertest.StartSelf(t, fmt.Sprintf("%s=%s %s %d %d", ownerEnv, dir, etcd.Endpoint(), size, seed))
	f := strings.Fields(line)
	if len(f) != 2 {
		t.Fatalf("owner process said %q", line)
	}
	id, err := ids.Parse(f[0])
	if err != nil {
		t.Fatal(err)
	}
	return cmd, id, f[1]
}

// viaProxy makes s's peer client reach target through a proxy that can cut
// the connections, and returns the proxy.
func viaProxy(t *testing.T, s *Server, target string) *peertest.Proxy {
	t.Helper()
	p, err := peertest.NewProxy(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	setPeerClient(t, s, peer.ClientConfig{Dialer: func(ctx context.Context, addr string) (net.Conn, error) {
		if addr == target {
			addr = p.Addr()
		}
		return (&net.Dialer{}).DialContext(ctx, "tcp", addr)
	}})
	return p
}

// setPeerClient replaces the peer client of s (before any migration).
func setPeerClient(t testing.TB, s *Server, cfg peer.ClientConfig) {
	t.Helper()
	c, err := peer.NewClient(cfg, peerstore.Sink{Store: s.migr.store})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.migr.client.Close()
	s.migr.client = c
}

// clientMigrate migrates id through a client of s (the protocol), failing
// the test if no answer comes within answerBound.
func clientMigrate(t *testing.T, s *Server, id ids.ObjectID) (ids.ObjectID, error) {
	t.Helper()
	cl, err := client.Connect(s.Socket())
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	type result struct {
		id  ids.ObjectID
		err error
	}
	done := make(chan result, 1)
	go func() {
		id, err := cl.Migrate(id)
		done <- result{id, err}
	}()
	select {
	case r := <-done:
		return r.id, r.err
	case <-time.After(answerBound):
		t.Fatalf("migrate of %v: no answer within %v", id, answerBound)
		return 0, nil
	}
}

// checkClearError fails unless err is the ConnectionError of a fetch that
// names the owner it failed on, with one status prefix.
func checkClearError(t *testing.T, err error) {
	t.Helper()
	if status.CodeOf(err) != status.ConnectionError {
		t.Fatalf("err = %v, want ConnectionError", err)
	}
	msg := err.Error()
	if !strings.Contains(msg, "fetch from instance") || strings.Count(msg, "ConnectionError") != 1 {
		t.Fatalf("unclear error: %q", msg)
	}
	t.Logf("the client got: %v", err)
}

// localObjects lists the ids of the objects s itself holds.
func localObjects(t *testing.T, s *Server) map[string]bool {
	t.Helper()
	raw, err := s.store.List("*", false, 0)
	if err != nil {
		t.Fatal(err)
	}
	var all map[string]struct {
		InstanceID uint64 `json:"instance_id"`
	}
	if err := json.Unmarshal(raw, &all); err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for id, o := range all {
		if o.InstanceID == s.store.InstanceID() {
			out[id] = true
		}
	}
	return out
}

// checkUntouched fails unless s holds the objects and bytes it held before.
func checkUntouched(t *testing.T, s *Server, base uint64, objects map[string]bool) {
	t.Helper()
	if u := used(s); u != base {
		t.Errorf("the destination uses %d bytes after the failure, %d before", u, base)
	}
	now := localObjects(t, s)
	for id := range now {
		if !objects[id] {
			t.Errorf("object %s appeared on the destination", id)
		}
	}
	if len(now) != len(objects) {
		t.Errorf("the destination holds %d objects, %d before", len(now), len(objects))
	}
}

// checkCopy fails unless cp is a local copy of a bigPattern(seed) tensor.
func checkCopy(t *testing.T, s *Server, cp ids.ObjectID, seed byte) {
	t.Helper()
	want := make([]byte, faultSize)
	bigPattern(want, seed)
	if shape, data := tensorBytes(t, s, cp); shape != fmt.Sprintf("[%d]", faultSize) || string(data) != string(want) {
		t.Fatal("the copy's shape or bytes differ")
	}
}

// TestMigrateOwnerKilled SIGKILLs the owner daemon while its tensor streams
// to B: B's client gets ConnectionError, B holds no new object and no more
// bytes, and after the owner restarted (a new instance storing the data
// again) a migrate works.
func TestMigrateOwnerKilled(t *testing.T) {
	etcd := etcdtest.Run(t)
	b := clusterServer(t, etcd, faultSize+64<<20)
	cmd, id, ep := startOwner(t, etcd, faultSize, 3)
	proxy := viaProxy(t, b, ep)
	synced(t, b)
	base, objects := used(b), localObjects(t, b)

	proxy.After(faultAfter, func() { _ = cmd.Process.Kill() })
	_, err := clientMigrate(t, b, id)
	checkClearError(t, err)
	if n := proxy.Forwarded(); n <= faultAfter || n >= faultSize {
		t.Fatalf("%d bytes went through before the failure: the kill did not fall mid-transfer", n)
	}
	checkUntouched(t, b, base, objects)

	// The owner comes back (a new instance: the old one's objects went with
	// it) and stores the data again; B migrates it.
	_, id2, ep2 := startOwner(t, etcd, faultSize, 4)
	viaProxy(t, b, ep2)
	synced(t, b)
	cp, err := clientMigrate(t, b, id2)
	if err != nil {
		t.Fatalf("retry after the restart: %v", err)
	}
	checkCopy(t, b, cp, 4)
}

// TestMigrateConnectionDropped cuts the peer connection between B and the
// owner A while A's tensor streams: B's client gets ConnectionError, B holds
// no new object and no more bytes, A released its pins (deleting the
// tensor there frees it), and with the connection back a retry works.
func TestMigrateConnectionDropped(t *testing.T) {
	etcd := etcdtest.Run(t)
	a := clusterServer(t, etcd, faultSize+32<<20)
	b := clusterServer(t, etcd, faultSize+64<<20)
	id, err := storeTensor(a, faultSize, func(p []byte) { bigPattern(p, 5) })
	if err != nil {
		t.Fatal(err)
	}
	proxy := viaProxy(t, b, a.PeerEndpoint())
	synced(t, b)
	base, objects := used(b), localObjects(t, b)

	proxy.After(faultAfter, proxy.Cut)
	_, err = clientMigrate(t, b, id)
	checkClearError(t, err)
	if n := proxy.Forwarded(); n <= faultAfter || n >= faultSize {
		t.Fatalf("%d bytes went through before the failure: the cut did not fall mid-transfer", n)
	}
	checkUntouched(t, b, base, objects)

	// The connection is back: the retry goes through the same proxy.
	cp, err := clientMigrate(t, b, id)
	if err != nil {
		t.Fatalf("retry: %v", err)
	}
	checkCopy(t, b, cp, 5)

	// The owner holds no pin any more: deleting its tensor frees its bytes.
	aBase := used(a)
	a.store.Delete([]ids.ObjectID{id}, store.DeleteOptions{Deep: true})
	peertest.Eventually(t, "the owner frees the tensor", func() bool { return used(a) <= aBase-faultSize })
}

// TestMigrateStaleEndpoint: an owner's remembered peer endpoint that no
// longer answers (the instance id taken over by a daemon elsewhere) is read
// again from etcd and the migrate goes through; a dead owner whose record
// is unchanged fails as before.
func TestMigrateStaleEndpoint(t *testing.T) {
	etcd := etcdtest.Run(t)
	a := clusterServer(t, etcd, 16<<20)
	b := clusterServer(t, etcd, 16<<20)
	first, second := putTensor(t, a, 1, 1<<20), putTensor(t, a, 2, 1<<20)
	synced(t, b)
	if _, err := clientMigrate(t, b, first); err != nil {
		t.Fatal(err)
	}
	owner := a.store.InstanceID()
	b.migr.mu.Lock()
	if b.migr.endpoints[owner] != a.PeerEndpoint() {
		b.migr.mu.Unlock()
		t.Fatalf("endpoint of instance %d not remembered: %v", owner, b.migr.endpoints)
	}
	dead, err := net.Listen("tcp", "127.0.0.1:0") // a port nobody serves once closed
	if err != nil {
		b.migr.mu.Unlock()
		t.Fatal(err)
	}
	b.migr.endpoints[owner] = dead.Addr().String()
	_ = dead.Close()
	b.migr.mu.Unlock()

	cp, err := clientMigrate(t, b, second)
	if err != nil {
		t.Fatalf("migrate through a stale endpoint: %v", err)
	}
	if _, data := tensorBytes(t, b, cp); string(data) != string(pattern(2, 1<<20)) {
		t.Fatal("the copy differs")
	}
	b.migr.mu.Lock()
	ep := b.migr.endpoints[owner]
	b.migr.mu.Unlock()
	if ep != a.PeerEndpoint() {
		t.Fatalf("remembered %q after the retry, want %q", ep, a.PeerEndpoint())
	}
}
