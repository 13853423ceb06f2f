// Package othertest runs part of a test as another local user: the test
// binary re-executes itself under a uid given by the kernel (only root can
// do that), from a copy other users can read.
//
// Use: at the top of the test package's TestMain, call Main(); in a test,
// Run(t, uid, "name", args...) runs the function registered under name with
// Register in a child running as uid, and returns its combined output and
// error.
package othertest

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
)

// UID is the uid tests run their other user as.
const UID = 1001

const envName = "V6D_OTHERTEST_FUNC"

var funcs = map[string]func(args []string) error{}

// Register names f for Run. Call it from an init function.
func Register(name string, f func(args []string) error) { funcs[name] = f }

// Main runs the registered function the environment names and exits, when
// this process is such a child; else it returns at once.
func Main() {
	name := os.Getenv(envName)
	if name == "" {
		return
	}
	f, ok := funcs[name]
	if !ok {
		fmt.Fprintf(os.Stderr, "othertest: no function %q\n", name)
		os.Exit(3)
	}
	if err := f(os.Args[len(os.Args)-countArgs():]); err != nil {
		fmt.Fprintf(os.Stderr, "%v\n", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func countArgs() int {
	var n int
	_, _ = fmt.Sscan(os.Getenv(envName+"_N"), &n)
	return n
}

var (
	copyOnce sync.Once
	copyPath string
	copyErr  error
)

// binary returns a copy of the test binary in a directory every user can
// read and traverse.
func binary() (string, error) {
	copyOnce.Do(func() {
		exe, err := os.Executable()
		if err != nil {
			copyErr = err
			return
		}
		dir, err := os.MkdirTemp("", "v6d-othertest-")
		if err != nil {
			copyErr = err
			return
		}
		if copyErr = os.Chmod(dir, 0o755); copyErr != nil {
			return
		}
		src, err := os.Open(exe)
		if err != nil {
			copyErr = err
			return
		}
		defer src.Close()
		copyPath = filepath.Join(dir, filepath.Base(exe))
		dst, err := os.OpenFile(copyPath, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o755)
		if err != nil {
			copyErr = err
			return
		}
		if _, err := io.Copy(dst, src); err != nil {
			copyErr = err
		}
		if err := dst.Close(); err != nil && copyErr == nil {
			copyErr = err
		}
	})
	return copyPath, copyErr
}

// Need skips the test unless this process can run another user's process
// (it is root). Call it before Run when Run is called off the test's goroutine.
func Need(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("running a client as another user needs root")
	}
}

// Run runs the function registered as name with args in a child process
// running as uid (and gid) UID, in a working directory it can read; call
// Need first.
func Run(t testing.TB, name string, args ...string) ([]byte, error) {
	bin, err := binary()
	if err != nil {
		return nil, fmt.Errorf("othertest: copy the test binary: %w", err)
	}
	cmd := exec.Command(bin, append([]string{"-test.run=^$"}, args...)...)
	cmd.Dir = filepath.Dir(bin)
	cmd.Env = append(os.Environ(), envName+"="+name, fmt.Sprintf("%s_N=%d", envName, len(args)))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: UID, Gid: UID}}
	return cmd.CombinedOutput()
}
