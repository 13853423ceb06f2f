package shm

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

func newArena(t *testing.T, size uint64) *Arena {
	t.Helper()
	a, err := Create(size)
	if err != nil {
		t.Fatalf("Create(%d): %v", size, err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func mapArena(t *testing.T, a *Arena, writable bool) *Mapping {
	t.Helper()
	size, err := FileSize(a.Fd())
	if err != nil {
		t.Fatal(err)
	}
	m, err := Map(a.Fd(), size, writable)
	if err != nil {
		t.Fatalf("Map(writable=%v): %v", writable, err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// blocks returns the bytes of the arena backed by memory (st_blocks).
func blocks(t *testing.T, fd int) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	return uint64(st.Blocks) * 512
}

func TestCreateSizes(t *testing.T) {
	for _, tc := range []struct {
		size, want uint64
		err        error
	}{
		{1, pageSize, nil},
		{pageSize, pageSize, nil},
		{pageSize + 1, 2 * pageSize, nil},
		{1 << 20, 1 << 20, nil},
		{0, 0, ErrBadSize},
		{1 << 63, 0, ErrBadSize},
		{^uint64(0), 0, ErrBadSize},
	} {
		t.Run(fmt.Sprint(tc.size), func(t *testing.T) {
			a, err := Create(tc.size)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("Create(%d) = %v, want %v", tc.size, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			if a.Size() != tc.want || uint64(len(a.Bytes())) != tc.want {
				t.Fatalf("Size() = %d, len(Bytes()) = %d, want %d", a.Size(), len(a.Bytes()), tc.want)
			}
			if got, err := FileSize(a.Fd()); err != nil || got != tc.want {
				t.Fatalf("FileSize = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}

// TestArenaIsMemfd checks that the arena is an anonymous memfd, not a file on
// /dev/shm, and that its fd is close-on-exec.
func TestArenaIsMemfd(t *testing.T) {
	a := newArena(t, 1<<20)
	link, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", a.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(link, "/memfd:"+arenaName) {
		t.Fatalf("arena fd links to %q, want /memfd:%s", link, arenaName)
	}
	flags, err := unix.FcntlInt(uintptr(a.Fd()), unix.F_GETFD, 0)
	if err != nil || flags&unix.FD_CLOEXEC == 0 {
		t.Fatalf("F_GETFD = %#x, %v; want FD_CLOEXEC", flags, err)
	}
}

func TestSeals(t *testing.T) {
	a := newArena(t, 1<<20)
	seals, err := unix.FcntlInt(uintptr(a.Fd()), unix.F_GET_SEALS, 0)
	if err != nil {
		t.Fatal(err)
	}
	if seals&arenaSeals != arenaSeals {
		t.Fatalf("seals %#x, want at least %#x", seals, arenaSeals)
	}
	for _, tc := range []struct {
		name string
		op   func() error
	}{
		{"shrink", func() error { return unix.Ftruncate(a.Fd(), int64(a.Size()/2)) }},
		{"shrink to 0", func() error { return unix.Ftruncate(a.Fd(), 0) }},
		{"grow", func() error { return unix.Ftruncate(a.Fd(), int64(a.Size()*2)) }},
		{"grow by fallocate", func() error { return unix.Fallocate(a.Fd(), 0, 0, int64(a.Size()*2)) }},
		{"add F_SEAL_WRITE", func() error {
			_, err := unix.FcntlInt(uintptr(a.Fd()), unix.F_ADD_SEALS, unix.F_SEAL_WRITE)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.op(); !errors.Is(err, unix.EPERM) {
				t.Fatalf("got %v, want EPERM", err)
			}
			if got, _ := FileSize(a.Fd()); got != a.Size() {
				t.Fatalf("file size %d after %s, want %d", got, tc.name, a.Size())
			}
		})
	}
}

func TestMapSharesMemory(t *testing.T) {
	a := newArena(t, 1<<20)
	ro := mapArena(t, a, false)
	rw := mapArena(t, a, true)
	if uint64(len(ro.Bytes())) != a.Size() || ro.Base() == 0 || ro.Base() == rw.Base() {
		t.Fatalf("read-only mapping: len %d, base %#x (rw base %#x)", len(ro.Bytes()), ro.Base(), rw.Base())
	}
	if ro.Base() != uintptr(unsafe.Pointer(&ro.Bytes()[0])) {
		t.Fatal("Base() is not the address of Bytes()[0]")
	}

	// Daemon writes, client reads.
	msg := []byte("written by the daemon")
	off := a.Size() - 4096 - 7
	copy(a.Bytes()[off:], msg)
	if got := ro.Bytes()[off : off+uint64(len(msg))]; !bytes.Equal(got, msg) {
		t.Fatalf("client read %q, want %q", got, msg)
	}
	// Client writes its own buffer, daemon and other readers see it.
	msg = []byte("written by a client")
	copy(rw.Bytes()[100:], msg)
	if got := a.Bytes()[100 : 100+len(msg)]; !bytes.Equal(got, msg) {
		t.Fatalf("daemon read %q, want %q", got, msg)
	}
	if got := ro.Bytes()[100 : 100+len(msg)]; !bytes.Equal(got, msg) {
		t.Fatalf("reader read %q, want %q", got, msg)
	}
}

// TestMappingOutlivesFdAndArena checks that a client's view stays readable
// after it closes the fd it received and after the daemon closes the arena.
func TestMappingOutlivesFdAndArena(t *testing.T) {
	a, err := Create(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	copy(a.Bytes(), "kept")
	fd, err := unix.Dup(a.Fd())
	if err != nil {
		t.Fatal(err)
	}
	m, err := Map(fd, a.Size(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	unix.Close(fd)
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if got := string(m.Bytes()[:4]); got != "kept" {
		t.Fatalf("read %q after closing fd and arena", got)
	}
}

func TestMapErrors(t *testing.T) {
	a := newArena(t, 1<<16)
	for _, tc := range []struct {
		name string
		fd   int
		size uint64
		err  error
	}{
		{"zero size", a.Fd(), 0, ErrBadSize},
		{"larger than file", a.Fd(), a.Size() + 1, ErrBadSize},
		{"huge", a.Fd(), 1 << 63, ErrBadSize},
		{"bad fd", -1, 4096, unix.EBADF},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := Map(tc.fd, tc.size, false)
			if !errors.Is(err, tc.err) {
				if m != nil {
					m.Close()
				}
				t.Fatalf("Map = %v, want %v", err, tc.err)
			}
		})
	}
}

const childEnv = "V6D_SHM_TEST_CHILD"

// TestReadOnlyMappingFaults checks that writing through a PROT_READ mapping
// kills the writer with SIGSEGV. It re-runs the test binary as a child that
// restores the default SIGSEGV action (the Go runtime would otherwise turn
// the fault into a fatal error and exit with status 2) and then writes.
func TestReadOnlyMappingFaults(t *testing.T) {
	if os.Getenv(childEnv) == "write-read-only" {
		writeThroughReadOnlyMapping()
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestReadOnlyMappingFaults$")
	cmd.Env = append(os.Environ(), childEnv+"=write-read-only")
	out, err := cmd.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("child did not fail: %v\n%s", err, out)
	}
	ws, ok := exit.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGSEGV {
		t.Fatalf("child ended with %v, want death by SIGSEGV\n%s", exit, out)
	}
	if !strings.Contains(string(out), "writing through the read-only mapping") {
		t.Fatalf("child died before the write:\n%s", out)
	}
}

func writeThroughReadOnlyMapping() {
	fail := func(err error) {
		fmt.Println("child setup failed:", err)
		os.Exit(3)
	}
	a, err := Create(1 << 16)
	if err != nil {
		fail(err)
	}
	m, err := Map(a.Fd(), a.Size(), false)
	if err != nil {
		fail(err)
	}
	// No core dump, and the kernel's default action for SIGSEGV. A zeroed
	// struct sigaction is SIG_DFL with no flags on every architecture.
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{}); err != nil {
		fail(err)
	}
	var act [8]uint64
	if _, _, errno := unix.RawSyscall6(unix.SYS_RT_SIGACTION, uintptr(unix.SIGSEGV),
		uintptr(unsafe.Pointer(&act)), 0, 8, 0, 0); errno != 0 {
		fail(errno)
	}
	fmt.Println("writing through the read-only mapping")
	os.Stdout.Sync()
	m.Bytes()[10] = 1
	fmt.Println("the write succeeded")
	os.Exit(0)
}

func TestTrim(t *testing.T) {
	for _, tc := range []struct {
		name         string
		offset, size uint64
		released     uint64
		err          error
	}{
		{"unaligned interior", 100, 10 * pageSize, 9 * pageSize, nil},
		{"aligned", 2 * pageSize, 3 * pageSize, 3 * pageSize, nil},
		{"whole arena", 0, 16 * pageSize, 16 * pageSize, nil},
		{"inside one page", pageSize + 1, pageSize - 2, 0, nil},
		{"straddles a page boundary", pageSize - 1, pageSize, 0, nil},
		{"empty", 0, 0, 0, nil},
		{"ends at arena end", 15*pageSize + 1, pageSize - 1, 0, nil},
		{"past the end", 15 * pageSize, 2 * pageSize, 0, ErrOutOfBounds},
		{"offset past the end", 17 * pageSize, 0, 0, ErrOutOfBounds},
		{"overflowing", 1, ^uint64(0), 0, ErrOutOfBounds},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := newArena(t, 16*pageSize)
			ro := mapArena(t, a, false)
			data := a.Bytes()
			for i := range data {
				data[i] = 0xa5
			}
			before := blocks(t, a.Fd())
			released, err := a.Trim(tc.offset, tc.size)
			if !errors.Is(err, tc.err) || (err == nil) != (tc.err == nil) {
				t.Fatalf("Trim(%d, %d) = %d, %v; want %v", tc.offset, tc.size, released, err, tc.err)
			}
			if released != tc.released {
				t.Fatalf("Trim(%d, %d) released %d, want %d", tc.offset, tc.size, released, tc.released)
			}
			if after := blocks(t, a.Fd()); before-after != released {
				t.Fatalf("st_blocks fell by %d bytes (from %d), want %d", before-after, before, released)
			}
			start := (tc.offset + pageSize - 1) / pageSize * pageSize
			for i, b := range ro.Bytes() {
				trimmed := uint64(i) >= start && uint64(i) < start+released
				if want := map[bool]byte{true: 0, false: 0xa5}[trimmed]; b != want {
					t.Fatalf("byte %d = %#x after Trim, want %#x", i, b, want)
				}
			}
		})
	}
}

func TestTrimFallsBackToMadvise(t *testing.T) {
	defer func(f func(int, uint32, int64, int64) error) { fallocate = f }(fallocate)
	fallocate = func(int, uint32, int64, int64) error { return unix.EOPNOTSUPP }
	a := newArena(t, 8*pageSize)
	for i := range a.Bytes() {
		a.Bytes()[i] = 1
	}
	before := blocks(t, a.Fd())
	released, err := a.Trim(pageSize, 4*pageSize)
	if err != nil || released != 4*pageSize {
		t.Fatalf("Trim = %d, %v", released, err)
	}
	if after := blocks(t, a.Fd()); before-after != released {
		t.Fatalf("st_blocks fell by %d bytes, want %d", before-after, released)
	}
	if a.Bytes()[pageSize] != 0 || a.Bytes()[pageSize-1] != 1 || a.Bytes()[5*pageSize] != 1 {
		t.Fatal("MADV_REMOVE did not zero exactly the trimmed pages")
	}
}

func TestPrefault(t *testing.T) {
	a := newArena(t, 64*pageSize)
	if got := blocks(t, a.Fd()); got != 0 {
		t.Fatalf("fresh arena has %d bytes of memory", got)
	}
	if err := a.Prefault(); err != nil {
		t.Fatal(err)
	}
	if got := blocks(t, a.Fd()); got != a.Size() {
		t.Fatalf("after Prefault %d of %d bytes are backed", got, a.Size())
	}
}

// TestTouchPages covers Prefault's fallback for kernels without
// MADV_POPULATE_WRITE: every page gets memory and the contents survive.
func TestTouchPages(t *testing.T) {
	a := newArena(t, 64*pageSize)
	a.Bytes()[5] = 42
	touchPages(a.Bytes())
	if got := blocks(t, a.Fd()); got != a.Size() {
		t.Fatalf("after touchPages %d of %d bytes are backed", got, a.Size())
	}
	if a.Bytes()[5] != 42 {
		t.Fatal("touchPages changed the contents")
	}
}

func TestClose(t *testing.T) {
	a, err := Create(1 << 16)
	if err != nil {
		t.Fatal(err)
	}
	m, err := Map(a.Fd(), a.Size(), true)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := m.Close(); err != nil {
			t.Fatalf("Mapping.Close: %v", err)
		}
		if err := a.Close(); err != nil {
			t.Fatalf("Arena.Close: %v", err)
		}
	}
	if a.Fd() != -1 || a.Bytes() != nil || m.Bytes() != nil || m.Base() != 0 {
		t.Fatal("closed arena or mapping still exposes its fd or memory")
	}
	if err := a.Prefault(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Prefault after Close = %v, want ErrClosed", err)
	}
	if _, err := a.Trim(0, 4096); !errors.Is(err, ErrClosed) {
		t.Fatalf("Trim after Close = %v, want ErrClosed", err)
	}
}

// TestConcurrentUse runs Trim, Prefault and Close together under -race.
func TestConcurrentUse(t *testing.T) {
	a, err := Create(64 * pageSize)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 3)
	go func() {
		for i := range 50 {
			if _, err := a.Trim(uint64(i%60)*pageSize, pageSize); err != nil && !errors.Is(err, ErrClosed) {
				done <- err
				return
			}
		}
		done <- nil
	}()
	go func() {
		for range 5 {
			if err := a.Prefault(); err != nil && !errors.Is(err, ErrClosed) {
				done <- err
				return
			}
		}
		done <- nil
	}()
	go func() { done <- a.Close() }()
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

func TestReadOnlyFd(t *testing.T) {
	a := newArena(t, 4*pageSize)
	ro := a.ReadOnlyFd()
	if ro < 0 || ro == a.Fd() {
		t.Fatalf("ReadOnlyFd() = %d (Fd %d)", ro, a.Fd())
	}
	flags, err := unix.FcntlInt(uintptr(ro), unix.F_GETFL, 0)
	if err != nil || flags&unix.O_ACCMODE != unix.O_RDONLY {
		t.Fatalf("read-only fd flags %#x, %v", flags, err)
	}
	if fd, err := unix.FcntlInt(uintptr(ro), unix.F_GETFD, 0); err != nil || fd&unix.FD_CLOEXEC == 0 {
		t.Fatalf("read-only fd is not close-on-exec: %#x, %v", fd, err)
	}
	var st, rost unix.Stat_t
	if err := unix.Fstat(a.Fd(), &st); err != nil {
		t.Fatal(err)
	}
	if err := unix.Fstat(ro, &rost); err != nil {
		t.Fatal(err)
	}
	if st.Ino != rost.Ino || st.Dev != rost.Dev {
		t.Fatal("the read-only fd is another file")
	}
	// Mode 0400: holders of the read-only fd cannot reopen it writable
	// (except privileged processes, which ignore the mode).
	if st.Mode&0o777 != 0o400 {
		t.Fatalf("arena mode %#o, want 0400", st.Mode&0o777)
	}
	if os.Geteuid() != 0 {
		if fd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", ro), unix.O_RDWR, 0); err == nil {
			unix.Close(fd)
			t.Fatal("reopened the read-only fd read-write")
		}
	}

	// No writable shared mapping through it; a read-only one sees the
	// daemon's writes; a private one is writable and keeps its writes.
	if m, err := Map(ro, a.Size(), true); !errors.Is(err, unix.EACCES) {
		if m != nil {
			m.Close()
		}
		t.Fatalf("writable Map of the read-only fd = %v, want EACCES", err)
	}
	m, err := Map(ro, a.Size(), false)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	copy(a.Bytes()[100:], "sealed")
	if got := string(m.Bytes()[100:106]); got != "sealed" {
		t.Fatalf("read-only mapping reads %q", got)
	}
	pm, view, err := MapPrivate(ro, 100, 6)
	if err != nil {
		t.Fatalf("MapPrivate of the read-only fd: %v", err)
	}
	defer pm.Close()
	copy(view, "mine!!")
	if got := string(a.Bytes()[100:106]); got != "sealed" {
		t.Fatalf("a private write reached the arena: %q", got)
	}
	if _, err := unix.Pwrite(ro, []byte("x"), 0); !errors.Is(err, unix.EBADF) {
		t.Fatalf("write to the read-only fd = %v, want EBADF", err)
	}

	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if a.ReadOnlyFd() != -1 {
		t.Fatal("ReadOnlyFd after Close is not -1")
	}
	if _, err := unix.FcntlInt(uintptr(ro), unix.F_GETFD, 0); !errors.Is(err, unix.EBADF) {
		t.Fatalf("read-only fd still open after Close: %v", err)
	}
}
