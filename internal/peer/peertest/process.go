package peertest

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// StartSelf runs the test binary again, with env ("NAME=value") added to its
// environment and no test selected, so that its TestMain can act as another
// process (a daemon a test then kills). It returns the process and the first
// line it printed (without the newline); the process is killed at the end of
// the test.
func StartSelf(t testing.TB, env string) (*exec.Cmd, string) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		t.Fatalf("process %s: %v", env, err)
	}
	return cmd, strings.TrimSuffix(line, "\n")
}
