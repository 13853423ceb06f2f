package server

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// privateSocketDir is the default socket directory of a user without
// XDG_RUNTIME_DIR: /tmp/vineyard-<euid>.
func privateSocketDir() string {
	return filepath.Join(os.TempDir(), "vineyard-"+strconv.Itoa(os.Geteuid()))
}

// makeSocketDir creates the directory of the socket. The private default,
// /tmp/vineyard-<uid>, sits in a directory every user may write to: another
// user who made it first could replace the socket and receive this user's
// data. So that one must be this user's and not writable by others.
func makeSocketDir(dir string) error {
	if filepath.Clean(dir) == privateSocketDir() {
		return ensurePrivateDir(dir, os.Geteuid())
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("server: create socket directory: %w", err)
	}
	return nil
}

// ensurePrivateDir creates dir with mode 0700, or accepts an existing dir
// (not a symlink) owned by uid and writable by no one else.
func ensurePrivateDir(dir string, uid int) error {
	err := os.Mkdir(dir, 0o700)
	if err == nil {
		// The umask may have taken bits away, never added: make it exact.
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("server: chmod socket directory: %w", err)
		}
		return nil
	}
	if !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("server: create socket directory: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return fmt.Errorf("server: socket directory: %w", err)
	}
	fix := fmt.Sprintf("remove it (rm -rf %s) and start again, or pass --socket in a directory of your own", dir)
	if !fi.IsDir() {
		return fmt.Errorf("server: socket directory %s exists but is not a directory (%v): %s", dir, fi.Mode().Type(), fix)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != uid {
		return fmt.Errorf("server: socket directory %s is owned by uid %d, not by this daemon's uid %d: "+
			"another user could replace the socket; %s", dir, st.Uid, uid, fix)
	}
	if perm := fi.Mode().Perm(); perm&0o022 != 0 {
		return fmt.Errorf("server: socket directory %s has mode %04o, writable by group or others: "+
			"another user could replace the socket; chmod 0700 %s", dir, perm, dir)
	}
	return nil
}
