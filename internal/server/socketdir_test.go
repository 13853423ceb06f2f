package server

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestEnsurePrivateDir(t *testing.T) {
	uid := os.Geteuid()
	base := t.TempDir()

	fresh := filepath.Join(base, "fresh")
	if err := ensurePrivateDir(fresh, uid); err != nil {
		t.Fatalf("new directory: %v", err)
	}
	fi, err := os.Stat(fresh)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("new directory: mode %v, err %v; want 0700", fi.Mode().Perm(), err)
	}
	if err := ensurePrivateDir(fresh, uid); err != nil {
		t.Fatalf("existing own 0700 directory refused: %v", err)
	}

	for _, mode := range []os.FileMode{0o777, 0o770, 0o702} {
		if err := os.Chmod(fresh, mode); err != nil {
			t.Fatal(err)
		}
		err := ensurePrivateDir(fresh, uid)
		if err == nil || !strings.Contains(err.Error(), "chmod 0700 "+fresh) {
			t.Fatalf("mode %04o: err %v, want a refusal naming chmod 0700", mode, err)
		}
	}
	if err := os.Chmod(fresh, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := ensurePrivateDir(fresh, uid); err != nil {
		t.Fatalf("mode 0755 (not writable by others) refused: %v", err)
	}

	// Owned by someone else: refused, naming the owner and the fix.
	if err := ensurePrivateDir(fresh, uid+1); err == nil || !strings.Contains(err.Error(), "rm -rf "+fresh) {
		t.Fatalf("other owner: err %v, want a refusal naming rm -rf", err)
	}

	link := filepath.Join(base, "link")
	if err := os.Symlink(fresh, link); err != nil {
		t.Fatal(err)
	}
	if err := ensurePrivateDir(link, uid); err == nil || !strings.Contains(err.Error(), "not a directory") {
		t.Fatalf("symlink: err %v, want a refusal", err)
	}
}

func TestMakeSocketDirChecksOnlyThePrivateDefault(t *testing.T) {
	// Any other directory is created as before, whatever its parent's mode.
	dir := filepath.Join(t.TempDir(), "a", "b")
	if err := makeSocketDir(dir); err != nil {
		t.Fatal(err)
	}
	if privateSocketDir() != filepath.Dir(privateDefaultSocket()) {
		t.Fatalf("privateSocketDir %s is not the directory of the default socket %s", privateSocketDir(), privateDefaultSocket())
	}
}
