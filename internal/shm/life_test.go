package shm

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// lifeHolderEnv makes this test binary a directory holder: it creates a
// directory with a life word, prints its pid and read-only fd, and waits.
const lifeHolderEnv = "V6D_SHM_LIFE_HOLDER"

func TestMain(m *testing.M) {
	if os.Getenv(lifeHolderEnv) != "" {
		d, err := CreateDirectory(64, 1<<16)
		if err == nil {
			err = d.Life()
		}
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println(os.Getpid(), d.ReadOnlyFd())
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// viewOfHolder maps the directory of a holder process through /proc, as a
// client maps the fd it receives.
func viewOfHolder(t *testing.T, pid, fd int) *DirectoryView {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/fd/%d", pid, fd))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	b, err := unix.Mmap(int(f.Fd()), 0, int(st.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Munmap(b) })
	v, err := NewDirectoryView(b)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestLifeWordTellsAKilledDaemon(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), lifeHolderEnv+"=1")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatal(err)
	}
	fields := strings.Fields(line)
	if len(fields) != 2 || fields[0] == "error" {
		t.Fatalf("holder: %q", line)
	}
	pid, _ := strconv.Atoi(fields[0])
	fd, _ := strconv.Atoi(fields[1])
	v := viewOfHolder(t, pid, fd)
	if got := v.Life(); got != LifeAlive {
		t.Fatalf("life word of a running holder: %v, want alive", got)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	// The kernel marks the word while it ends the process, before wait returns.
	if got := v.Life(); got != LifeDead {
		t.Fatalf("life word of a SIGKILLed holder: %v, want dead", got)
	}
}

func TestLifeWordClearedOnClose(t *testing.T) {
	d, err := CreateDirectory(64, 1<<16)
	if err != nil {
		t.Fatal(err)
	}
	v, err := NewDirectoryView(d.data)
	if err != nil {
		t.Fatal(err)
	}
	if got := v.Life(); got != LifeUnknown {
		t.Fatalf("life word before Life: %v, want unknown", got)
	}
	if err := d.Life(); err != nil {
		t.Fatal(err)
	}
	if got := v.Life(); got != LifeAlive {
		t.Fatalf("life word: %v, want alive", got)
	}
	d.life.end() // as Close does, while the mapping still exists
	d.life = nil
	if got := v.Life(); got != LifeUnknown {
		t.Fatalf("life word after the holder ended: %v, want unknown", got)
	}
	if err := d.Close(); err != nil {
		t.Fatal(err)
	}
}
