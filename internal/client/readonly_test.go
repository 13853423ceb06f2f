package client

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"runtime/debug"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/v6d-io/v6d-go/internal/ids"
)

// writerEnv makes the test binary put one blob into the daemon on the socket
// it names, print the blob's id and exit (see TestMain): a writer in another
// process, so that the test process itself has only read.
const writerEnv = "V6D_CLIENT_TEST_WRITER"

const writerData = "written by another process"

func runWriter(sock string) int {
	c, err := Connect(sock)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer c.Close()
	bid, buf, err := c.CreateBuffer(uint64(len(writerData)))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	copy(buf, writerData)
	tree := fmt.Sprintf(`{"typename":"vineyard::Tensor<uint8>","shape_":"[%d]","buffer_":{"id":"%v"}}`, len(writerData), bid)
	if _, _, err := c.CreateMetadata([]byte(tree), []ids.ObjectID{bid}); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println(bid)
	return 0
}

var faultProbe byte = '!'

// writeFaults reports whether writing one byte at b[0] faults.
func writeFaults(b []byte) (faulted bool) {
	old := debug.SetPanicOnFault(true)
	defer debug.SetPanicOnFault(old)
	defer func() {
		if recover() != nil {
			faulted = true
		}
	}()
	b[0] = faultProbe // the test fails anyway if this write goes through
	return false
}

// arenaMappings returns the permissions ("r--s", "rw-s", "rw-p"...) of this
// process's mappings of the file with inode ino.
func arenaMappings(t *testing.T, ino uint64) []string {
	t.Helper()
	f, err := os.Open("/proc/self/maps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var perms []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		// address perms offset dev inode path
		fields := strings.Fields(sc.Text())
		if len(fields) >= 6 && fields[4] == fmt.Sprint(ino) && strings.Contains(fields[5], "vineyard-arena") {
			perms = append(perms, fields[1])
		}
	}
	return perms
}

// TestReaderMapsArenaReadOnly: a client that has only read holds only the
// daemon's read-only fd, so its mapping is read-only and it cannot make a
// writable one; its first create brings the read-write fd, and its views of
// sealed blobs stay valid (and read-only) across that upgrade.
func TestReaderMapsArenaReadOnly(t *testing.T) {
	sock, _ := startDaemonProcess(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), writerEnv+"="+sock)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("writer: %v", err)
	}
	bid, err := ids.Parse(strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("writer printed %q: %v", out, err)
	}

	c, err := Connect(sock)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	view, err := c.Get(bid)
	if err != nil || string(view) != writerData {
		t.Fatalf("Get = %q, %v", view, err)
	}
	if len(c.w.regions) != 1 {
		t.Fatalf("%d arena fds received, want 1", len(c.w.regions))
	}
	var a *arena
	for _, r := range c.w.regions {
		a = r
	}
	arenas.mu.Lock()
	fd, writable := a.fd, a.writable
	arenas.mu.Unlock()
	flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0)
	if err != nil || flags&unix.O_ACCMODE != unix.O_RDONLY || writable {
		t.Fatalf("a reader holds an fd with flags %#x (%v), writable %v; want O_RDONLY", flags, err, writable)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	if perms := arenaMappings(t, st.Ino); len(perms) != 1 || perms[0] != "r--s" {
		t.Fatalf("reader's arena mappings %v, want one r--s", perms)
	}
	if m, err := unix.Mmap(fd, 0, 4096, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED); err == nil {
		_ = unix.Munmap(m)
		t.Fatal("the reader's fd maps writable")
	}
	if !writeFaults(view) {
		t.Fatal("a write through a got blob did not fault")
	}

	// Private copy-on-write views work from the read-only fd.
	pv, err := c.MapPrivate(bid)
	if err != nil {
		t.Fatalf("MapPrivate with a read-only fd: %v", err)
	}
	pv[0] = 'W'
	if string(view) != writerData {
		t.Fatal("a private write reached the shared view")
	}
	if err := UnmapPrivate(addr(pv)); err != nil {
		t.Fatal(err)
	}

	// The first create brings the read-write fd.
	nid, buf, err := c.CreateBuffer(64)
	if err != nil {
		t.Fatalf("CreateBuffer after reading: %v", err)
	}
	copy(buf, "the reader's own blob")
	if len(c.w.regions) != 2 || mappedArenas() != 1 {
		t.Fatalf("after a create: %d fds received, %d arenas mapped; want 2 and 1", len(c.w.regions), mappedArenas())
	}
	arenas.mu.Lock()
	fd, writable = a.fd, a.writable
	arenas.mu.Unlock()
	if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFL, 0); err != nil || flags&unix.O_ACCMODE != unix.O_RDWR || !writable {
		t.Fatalf("after a create the arena fd has flags %#x (%v), writable %v; want O_RDWR", flags, err, writable)
	}
	if err := c.Seal(nid); err != nil {
		t.Fatal(err)
	}
	got, err := c.Get(nid)
	if err != nil || !bytes.HasPrefix(got, []byte("the reader's own blob")) {
		t.Fatalf("own blob reads %q, %v", got, err)
	}
	// The view got before the upgrade is the same, still read-only.
	if string(view) != writerData {
		t.Fatalf("view after the upgrade reads %q", view)
	}
	if !writeFaults(view) || !writeFaults(got) {
		t.Fatal("a read-only view became writable")
	}
	perms := arenaMappings(t, st.Ino)
	slices.Sort(perms)
	if !slices.Equal(perms, []string{"r--s", "rw-s"}) {
		t.Fatalf("arena mappings after a create %v, want r--s and rw-s", perms)
	}
	if err := c.Release(bid); err != nil {
		t.Fatal(err)
	}
}
