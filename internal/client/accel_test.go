package client

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/status"
)

// Test access to the accelerators of a client.

// leaseOf returns the client's lease accelerator; nil when it has none.
func leaseOf(c *Client) *leaser {
	for _, a := range c.accels {
		if l, ok := a.(*leaser); ok {
			return l
		}
	}
	return nil
}

// pipelineOf returns the client's pipelined-put accelerator; nil when it
// has none.
func pipelineOf(c *Client) *pipeline {
	for _, a := range c.accels {
		if p, ok := a.(*pipeline); ok {
			return p
		}
	}
	return nil
}

// ownPutsOf returns the client's own-put accelerator; nil when it has
// none.
func ownPutsOf(c *Client) *ownPuts {
	for _, a := range c.accels {
		if o, ok := a.(*ownPuts); ok {
			return o
		}
	}
	return nil
}

func TestParseAccel(t *testing.T) {
	for _, tc := range []struct {
		from Accel
		spec string
		want Accel
		bad  bool
	}{
		{AccelAll, "", AccelAll, false},
		{AccelAll, "-directory", AccelAll &^ AccelDirectory, false},
		{AccelAll, "-lease, -pipelined", AccelDirectory | AccelOwnPut, false},
		{AccelAll, "none", AccelNone, false},
		{AccelNone, "all,-ownput", AccelAll &^ AccelOwnPut, false},
		{AccelNone, "+lease,directory", AccelLease | AccelDirectory, false},
		{AccelAll, "-none", AccelAll, false},
		{AccelAll, "-directory,-lease,-pipelined,-ownput", AccelNone, false},
		{AccelAll, "-dir", AccelAll, true},
		{AccelAll, "fast", AccelAll, true},
	} {
		got, err := ParseAccel(tc.from, tc.spec)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("ParseAccel(%v, %q) = %v, %v; want %v (error %v)", tc.from, tc.spec, got, err, tc.want, tc.bad)
		}
		if tc.bad && status.CodeOf(err) != status.Invalid {
			t.Errorf("ParseAccel(%q) = %v, want Invalid", tc.spec, err)
		}
	}
	if got := (AccelLease | AccelOwnPut).String(); got != "lease,ownput" {
		t.Errorf("String = %q", got)
	}
	// Those that need one that is off are off.
	if got := (AccelAll &^ AccelLease).closure(); got != AccelDirectory {
		t.Errorf("closure without the lease = %v", got)
	}
	if got := (AccelAll &^ AccelDirectory).closure(); got != AccelLease {
		t.Errorf("closure without the directory = %v", got)
	}
}

// TestAccelEnvRefused: a value of AccelEnv Connect cannot read fails the
// connect, naming the variable.
func TestAccelEnvRefused(t *testing.T) {
	srv := startServer(t, 16<<20)
	t.Setenv(AccelEnv, "-warp")
	c, err := Connect(srv.Socket())
	if err == nil {
		_ = c.Close()
		t.Fatal("connected with a bad " + AccelEnv)
	}
	if status.CodeOf(err) != status.Invalid || !strings.Contains(err.Error(), AccelEnv) {
		t.Fatalf("connect = %v, want Invalid naming %s", err, AccelEnv)
	}
}

// TestEachAccelOff runs puts, gets, names and deletes with each
// accelerator off, and with none: the plain path gives the same results
// and references, and an accelerator that is off answers nothing.
func TestEachAccelOff(t *testing.T) {
	srv := startServer(t, 64<<20)
	st := srv.Store()
	for _, tc := range []struct {
		name string
		a    Accel
	}{
		{"all", AccelAll},
		{"-directory", AccelAll &^ AccelDirectory},
		{"-lease", AccelAll &^ AccelLease},
		{"-pipelined", AccelAll &^ AccelPipelined},
		{"-ownput", AccelAll &^ AccelOwnPut},
		{"none", AccelNone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w, err := Connect(srv.Socket(), WithAccel(tc.a))
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			r, err := Connect(srv.Socket(), WithAccel(tc.a))
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			on := w.Accelerators()
			if on&^tc.a.closure() != 0 {
				t.Fatalf("accelerators %v on, allowed %v", on, tc.a)
			}
			if os.Getenv(AccelEnv) == "" && on != tc.a.closure() {
				t.Fatalf("accelerators %v on, want %v", on, tc.a.closure())
			}
			var objs []ids.ObjectID
			// Small puts (pipelined when on), each got back at once by
			// the writer (from the put when ownput is on) and by the
			// reader (from the directory when on).
			for i := range 20 {
				data := bytes.Repeat([]byte{byte(i + 1)}, 1+i*100)
				id, bids, err := w.CreateInline(fmt.Appendf(nil, pipelinedTree, len(data)), [][]byte{data})
				if err != nil {
					t.Fatal(err)
				}
				objs = append(objs, id)
				for _, c := range []*Client{w, r} {
					if _, err := c.GetObject(id); err != nil {
						t.Fatal(err)
					}
					got, _, err := c.BlobPointer(bids[0])
					if err != nil || !bytes.Equal(got, data) {
						t.Fatalf("put %d: got %d bytes, %v", i, len(got), err)
					}
					if err := c.Release(id); err != nil {
						t.Fatal(err)
					}
				}
			}
			// A put of buffers (carved from the lease when on), got as
			// blobs and as metadata.
			id, bid := put(t, w, bytes.Repeat([]byte("ab"), 5000))
			objs = append(objs, id)
			views, err := r.GetBuffers([]ids.ObjectID{bid, bid, ids.EmptyBlob}, false)
			if err != nil || len(views[0]) != 10000 || !bytes.Equal(views[0], views[1]) || views[2] != nil {
				t.Fatalf("GetBuffers: %v", err)
			}
			if tree, err := r.GetMetadata(id); err != nil || !bytes.Contains(tree, []byte(bid.String())) {
				t.Fatalf("GetMetadata = %s, %v", tree, err)
			}
			for range 2 {
				if err := r.Release(bid); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Release(id); err != nil { // the seal's reference
				t.Fatal(err)
			}
			if err := w.Persist(id); err != nil {
				t.Fatal(err)
			}
			if err := w.PutName(id, "accel-"+tc.name); err != nil {
				t.Fatal(err)
			}
			if got, err := r.GetName("accel-"+tc.name, false, 0); err != nil || got != id {
				t.Fatalf("GetName = %v, %v", got, err)
			}
			if err := r.DropName("accel-" + tc.name); err != nil {
				t.Fatal(err)
			}
			if _, err := r.Delete(objs, false, true, false); err != nil {
				t.Fatal(err)
			}
			for _, id := range objs {
				if _, err := w.GetObject(id); code(err) != status.ObjectNotExists {
					t.Fatalf("get of deleted %v = %v", id, err)
				}
			}
			if on&AccelDirectory == 0 && r.Stats().DirectoryGets+w.Stats().DirectoryGets != 0 {
				t.Errorf("%d gets answered from a directory that is off", r.Stats().DirectoryGets+w.Stats().DirectoryGets)
			}
			if on&AccelOwnPut == 0 && w.Stats().OwnPutGets != 0 {
				t.Errorf("%d gets answered from own puts with ownput off", w.Stats().OwnPutGets)
			}
			if on&AccelDirectory != 0 && r.Stats().DirectoryGets == 0 {
				t.Errorf("no get answered from the directory")
			}
			for _, c := range []*Client{w, r} {
				if err := c.ReleaseLease(); err != nil {
					t.Fatal(err)
				}
				if err := c.FlushReleases(); err != nil {
					t.Fatal(err)
				}
			}
			if err := st.CheckInvariants(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// needAccel skips a test of accelerators a when AccelEnv turns any of them
// off (make test-accel-off runs the package so).
func needAccel(t testing.TB, a Accel) {
	t.Helper()
	allowed, err := ParseAccel(AccelAll, os.Getenv(AccelEnv))
	if err != nil {
		t.Fatal(err)
	}
	if missing := a &^ allowed.closure(); missing != 0 {
		t.Skipf("tests accelerators that %s=%q turns off: %v", AccelEnv, os.Getenv(AccelEnv), missing)
	}
}
