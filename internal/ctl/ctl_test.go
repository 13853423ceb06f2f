package ctl

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/v6d-io/v6d-go/internal/client"
	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/server"
	"github.com/v6d-io/v6d-go/internal/servertest"
)

// syncBuffer is a bytes.Buffer safe to read while a command writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// run runs vineyardctl with args and returns its exit code and output.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(args, &out, &errb, nil)
	return code, out.String(), errb.String()
}

// ok runs vineyardctl and fails the test unless it exits 0.
func ok(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errs := run(t, args...)
	if code != 0 {
		t.Fatalf("vineyardctl %v: exit %d\n%s%s", args, code, out, errs)
	}
	return out
}

func writeFile(t *testing.T, data []byte, name string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// npyFile makes a .npy file of int16 values 0..n-1 in shape, C or Fortran
// order: element (i, j) of a Fortran 2-D file is at j*rows + i.
func npyFile(t *testing.T, shape []uint64, fortran bool) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := writeNpyHeader(&b, "<i2", fortran, shape); err != nil {
		t.Fatal(err)
	}
	n, _ := count(shape)
	vals := make([]int16, n)
	if fortran && len(shape) == 2 {
		for i := range shape[0] {
			for j := range shape[1] {
				vals[j*shape[0]+i] = int16(i*shape[1] + j) // the C-order value at (i, j)
			}
		}
	} else {
		for i := range vals {
			vals[i] = int16(i)
		}
	}
	if err := binary.Write(&b, binary.LittleEndian, vals); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func TestPutGetRaw(t *testing.T) {
	srv := servertest.Start(t, server.Config{})
	sock := "--socket=" + srv.Socket()
	data := bytes.Repeat([]byte("vineyard "), 1000)
	in := writeFile(t, data, "in.bin")
	id := strings.TrimSpace(ok(t, "put", sock, in))
	if oid, err := ids.Parse(id); err != nil || !oid.IsBlob() {
		t.Fatalf("put printed %q, not a blob id", id)
	}
	out := filepath.Join(t.TempDir(), "out.bin")
	ok(t, "get", id, "-o", out, sock)
	got, err := os.ReadFile(out)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("get wrote %d bytes (%v), want the %d put", len(got), err, len(data))
	}
	// An existing file is kept unless --force.
	if code, _, errs := run(t, "get", id, "-o", out, sock); code != ExitUsage || !strings.Contains(errs, "--force") {
		t.Fatalf("get over an existing file: exit %d, %s", code, errs)
	}
	var listedObjs []listed
	if err := json.Unmarshal([]byte(ok(t, "ls", sock, "-o", "json")), &listedObjs); err != nil {
		t.Fatal(err)
	}
	if len(listedObjs) != 1 || listedObjs[0].ID != id || listedObjs[0].Nbytes != uint64(len(data)) {
		t.Fatalf("ls: %+v, want the one blob %s", listedObjs, id)
	}
	ok(t, "delete", sock, id)
	code, _, errs := run(t, "get", id, "-o", filepath.Join(t.TempDir(), "gone"), sock)
	if code != ExitNotFound {
		t.Fatalf("get of a deleted object: exit %d (%s), want %d", code, errs, ExitNotFound)
	}
	if code, _, _ := run(t, "delete", sock, id); code != ExitNotFound {
		t.Fatalf("delete of a deleted object: exit %d, want %d", code, ExitNotFound)
	}
}

func TestPutGetNpy(t *testing.T) {
	srv := servertest.Start(t, server.Config{})
	sock := "--socket=" + srv.Socket()
	for _, tc := range []struct {
		name    string
		shape   []uint64
		fortran bool
	}{
		{"vector", []uint64{7}, false},
		{"matrix", []uint64{3, 4}, false},
		{"fortran", []uint64{3, 4}, true},
		{"empty", []uint64{0, 5}, false},
		{"scalar", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := npyFile(t, tc.shape, tc.fortran)
			id := strings.TrimSpace(ok(t, "put", sock, writeFile(t, file, "a.npy")))
			var in inspection
			if err := json.Unmarshal([]byte(ok(t, "inspect", id, sock, "-o", "json")), &in); err != nil {
				t.Fatal(err)
			}
			if in.Typename != "vineyard::Tensor<int16>" {
				t.Fatalf("inspect: typename %q", in.Typename)
			}
			n, _ := count(tc.shape)
			if in.BlobBytes != 2*n {
				t.Fatalf("inspect: %d blob bytes, want %d", in.BlobBytes, 2*n)
			}
			// The blob holds the values in C order (upstream's layout) whatever the file's order.
			raw := filepath.Join(t.TempDir(), "raw")
			if n > 0 {
				ok(t, "get", id, "-o", raw, sock)
				want := npyFile(t, tc.shape, false)
				got, _ := os.ReadFile(raw)
				if !bytes.Equal(got, want[len(want)-len(got):]) || len(got) != int(2*n) {
					t.Fatalf("raw bytes of the tensor: %v", got)
				}
			}
			out := filepath.Join(t.TempDir(), "b.npy")
			ok(t, "get", id, "-o", out, sock)
			f, err := os.Open(out)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			h, err := readNpyHeader(f)
			if err != nil {
				t.Fatal(err)
			}
			if h.descr != "<i2" || h.fortran || len(h.shape) != len(tc.shape) {
				t.Fatalf("header %+v", h)
			}
			got, _ := os.ReadFile(out)
			want := npyFile(t, tc.shape, false)
			if !bytes.Equal(got[len(got)-int(2*n):], want[len(want)-int(2*n):]) {
				t.Fatal("values differ")
			}
		})
	}
}

func TestExitCodes(t *testing.T) {
	srv := servertest.Start(t, server.Config{})
	sock := "--socket=" + srv.Socket()
	blob := strings.TrimSpace(ok(t, "put", sock, writeFile(t, []byte("x"), "x")))
	for _, tc := range []struct {
		name string
		args []string
		code int
		says string
	}{
		{"no command", nil, ExitUsage, "Usage"},
		{"unknown command", []string{"frobnicate"}, ExitUsage, "unknown command"},
		{"unknown flag", []string{"ls", "--frob"}, ExitUsage, "frob"},
		{"bad output", []string{"ls", sock, "-o", "yaml"}, ExitUsage, "text or json"},
		{"get without -o", []string{"get", sock, blob}, ExitUsage, "-o FILE"},
		{"no daemon", []string{"ls", "--socket", filepath.Join(t.TempDir(), "none.sock")}, ExitUnreachable, "cannot connect"},
		{"no such id", []string{"inspect", sock, "o0000000000000042"}, ExitNotFound, "does not exist"},
		{"no such name", []string{"inspect", sock, "nobody"}, ExitNotFound, "neither an object id"},
		{"blob to npy", []string{"get", sock, blob, "-o", filepath.Join(t.TempDir(), "x.npy")}, ExitUnsupported, "not a vineyard::Tensor"},
		{"blob to parquet", []string{"get", sock, blob, "-o", filepath.Join(t.TempDir(), "x.parquet")}, ExitUnsupported, ".parquet is written for"},
		{"not npy", []string{"put", sock, writeFile(t, []byte("plain text"), "t.npy")}, ExitUnsupported, "not a .npy file"},
		{"object dtype", []string{"put", sock, writeFile(t, func() []byte {
			var b bytes.Buffer
			_ = writeNpyHeader(&b, "|O", false, []uint64{1})
			return append(b.Bytes(), make([]byte, 8)...)
		}(), "o.npy")}, ExitUnsupported, "plain number type"},
		{"short npy", []string{"put", sock, writeFile(t, npyFile(t, []uint64{4}, false)[:130], "s.npy")}, ExitUnsupported, "needs 8 bytes"},
		{"empty file", []string{"put", sock, writeFile(t, nil, "e")}, ExitUnsupported, "empty"},
		{"named blob", []string{"put", sock, "--name", "n", writeFile(t, []byte("x"), "n")}, ExitUsage, "never persisted or named"},
		{"missing file", []string{"put", sock, "/nonexistent/f"}, ExitFailed, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := run(t, tc.args...)
			if code != tc.code || !strings.Contains(out+errs, tc.says) {
				t.Fatalf("exit %d, want %d; output lacks %q:\n%s%s", code, tc.code, tc.says, out, errs)
			}
		})
	}
	// Nothing of the failed puts was left behind.
	var objs []listed
	if err := json.Unmarshal([]byte(ok(t, "ls", sock, "-o", "json", "--all")), &objs); err != nil || len(objs) != 1 {
		t.Fatalf("ls after the failures: %+v (%v), want only %s", objs, err, blob)
	}
}

func TestNamesLsInspect(t *testing.T) {
	srv := servertest.Start(t, server.Config{})
	sock := "--socket=" + srv.Socket()
	ok(t, "put", sock, "--name", "matrix", writeFile(t, npyFile(t, []uint64{2, 3}, false), "m.npy"))
	ok(t, "put", sock, writeFile(t, []byte("blob"), "b"))
	text := ok(t, "ls", sock)
	if !strings.Contains(text, "vineyard::Tensor<int16>") || !strings.Contains(text, "matrix") ||
		!strings.Contains(text, "vineyard::Blob") || strings.Count(text, "\n") != 3 {
		t.Fatalf("ls (the tensor and the loose blob, not the tensor's own blob):\n%s", text)
	}
	if text := ok(t, "ls", sock, "--type", "vineyard::Tensor<*>"); strings.Contains(text, "vineyard::Blob") {
		t.Fatalf("ls --type:\n%s", text)
	}
	if text := ok(t, "ls", sock, "mat*"); strings.Count(text, "\n") != 2 {
		t.Fatalf("ls mat*:\n%s", text)
	}
	if text := ok(t, "ls", sock, "--limit", "1"); strings.Count(text, "\n") != 2 {
		t.Fatalf("ls --limit 1:\n%s", text)
	}
	text = ok(t, "inspect", sock, "matrix")
	for _, want := range []string{"vineyard::Tensor<int16>", "names: matrix", "persisted", "buffer_: blob", "(here)", "shape_ = [2, 3]"} {
		if !strings.Contains(text, want) {
			t.Fatalf("inspect lacks %q:\n%s", want, text)
		}
	}
	// delete by name
	ok(t, "delete", sock, "matrix")
	if code, _, _ := run(t, "inspect", sock, "matrix"); code != ExitNotFound {
		t.Fatalf("inspect of a deleted name: exit %d", code)
	}
}

func TestStatus(t *testing.T) {
	srv := servertest.Start(t, server.Config{})
	var rep statusReport
	if err := json.Unmarshal([]byte(ok(t, "status", "--socket", srv.Socket(), "-o", "json")), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Instance.MemoryLimit != servertest.DefaultSize || len(rep.Cluster) != 1 || rep.Endpoint != srv.Socket() {
		t.Fatalf("status: %+v", rep)
	}
	if text := ok(t, "status", "--socket", srv.Socket()); !strings.Contains(text, "16.0 MiB") || !strings.Contains(text, "1 instance") {
		t.Fatalf("status:\n%s", text)
	}
}

// TestRPC: the same commands over the TCP listener, with its secret.
func TestRPC(t *testing.T) {
	srv := servertest.StartRPC(t, server.Config{}, "s3cret")
	secret := writeFile(t, []byte("s3cret\n"), "secret")
	ep := "--endpoint=" + srv.RPCEndpoint()
	data := []byte("over tcp")
	id := strings.TrimSpace(ok(t, "put", ep, "--rpc-auth-file", secret, writeFile(t, data, "d")))
	out := filepath.Join(t.TempDir(), "o")
	ok(t, "get", ep, "--rpc-auth-file", secret, id, "-o", out)
	if got, _ := os.ReadFile(out); !bytes.Equal(got, data) {
		t.Fatalf("got %q", got)
	}
	// The environment works as the flags do.
	t.Setenv(client.RPCEndpointEnv, srv.RPCEndpoint())
	t.Setenv(client.SocketEnv, "")
	t.Setenv(client.RPCSecretEnv, "s3cret")
	if text := ok(t, "ls"); !strings.Contains(text, id) {
		t.Fatalf("ls over VINEYARD_RPC_ENDPOINT:\n%s", text)
	}
	bad := writeFile(t, []byte("wrong"), "bad")
	if code, _, errs := run(t, "ls", ep, "--rpc-auth-file", bad); code != ExitUnreachable {
		t.Fatalf("a wrong secret: exit %d (%s), want %d", code, errs, ExitUnreachable)
	}
}

// TestWatch: watch prints what exists, then each change, as JSON lines.
func TestWatch(t *testing.T) {
	srv := servertest.Start(t, server.Config{})
	sock := "--socket=" + srv.Socket()
	first := strings.TrimSpace(ok(t, "put", sock, writeFile(t, []byte("first"), "f")))
	var out, errb syncBuffer
	stop := make(chan struct{})
	defer close(stop)
	done := make(chan int, 1)
	go func() {
		done <- Main([]string{"watch", sock, "-o", "json", "--interval", "20ms", "--max-events", "2"}, &out, &errb, stop)
	}()
	for !strings.Contains(out.String(), first) { // its first listing is printed
		select {
		case code := <-done:
			t.Fatalf("watch ended early: exit %d: %s", code, errb.String())
		default:
		}
		waitABit()
	}
	second := strings.TrimSpace(ok(t, "put", sock, writeFile(t, []byte("second"), "s")))
	ok(t, "delete", sock, first)
	if code := <-done; code != 0 {
		t.Fatalf("watch: exit %d: %s", code, errb.String())
	}
	var events []struct {
		Event string `json:"event"`
		ID    string `json:"id"`
	}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		var ev struct {
			Event string `json:"event"`
			ID    string `json:"id"`
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("line %q: %v", line, err)
		}
		events = append(events, ev)
	}
	seen := map[string]string{}
	for _, ev := range events {
		seen[ev.Event+" "+ev.ID] = ev.ID
	}
	for _, want := range []string{"exists " + first, "added " + second, "deleted " + first} {
		if _, ok := seen[want]; !ok {
			t.Fatalf("watch printed %+v, no %q", events, want)
		}
	}
}

// waitABit yields while polling for output (no assertion depends on it).
func waitABit() { time.Sleep(5 * time.Millisecond) }

// TestSpilledStatusAndGet: with spilling on, files put past the arena's
// size are spilled, status says so, and get loads them back unchanged.
func TestSpilledStatusAndGet(t *testing.T) {
	srv := servertest.Start(t, server.Config{Size: 16 << 20, SpillPath: filepath.Join(servertest.Dir(t), "spill")})
	sock := "--socket=" + srv.Socket()
	var idl []string
	var files [][]byte
	for i := range 12 {
		data := bytes.Repeat([]byte{byte(i + 1)}, 2<<20)
		idl = append(idl, strings.TrimSpace(ok(t, "put", sock, writeFile(t, data, "f"))))
		files = append(files, data)
	}
	var rep statusReport
	if err := json.Unmarshal([]byte(ok(t, "status", sock, "-o", "json")), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Instance.SpilledObjects == 0 {
		t.Fatalf("24 MiB put into a 16 MiB arena, nothing spilled: %+v", rep.Instance)
	}
	if text := ok(t, "status", sock); !strings.Contains(text, "spilled to disk") {
		t.Fatalf("status:\n%s", text)
	}
	for i, id := range idl {
		out := filepath.Join(t.TempDir(), "o")
		ok(t, "get", sock, id, "-o", out)
		if got, _ := os.ReadFile(out); !bytes.Equal(got, files[i]) {
			t.Fatalf("file %d came back different", i)
		}
	}
}
