package store

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/shm"
	"github.com/v6d-io/v6d-go/internal/status"
)

// Lifecycle traces: testdata/traces/*.txt are scripts of store operations
// from named sessions, with the expected state after steps. The invariant
// checker runs after every step. The format, one step per line:
//
//	# comment
//	A create B SIZE          session A creates blob B (unsealed) of SIZE bytes
//	A seal B                 A seals B
//	A drop B                 A drops its unsealed B
//	A shrink B SIZE          A shrinks its unsealed B
//	A get B...               A gets blobs (get_buffers, a reference each)
//	A getdata O...           A gets trees with their blobs (a reference each)
//	A incref B...            A takes references
//	A release B...           A releases references
//	A put O JSON             A creates object O; "$X" in JSON is X's id
//	A close                  A's connection ends
//	A pin X                  A's client pins X in its pin page (as a
//	                         directory get does; the page is made at A's
//	                         first pin or pipelined put)
//	A unpin X                A's client clears its pin of X
//	rescan                   the pin rescan runs (as its timer does)
//	A pput O TREE B:OFF:SIZE[:K]...  A's client counts a pipelined put
//	                         (submitted word) and the daemon handles it:
//	                         blobs carved as adopt does, the object the
//	                         lease's next id above them; TREE has no spaces
//	                         and names the blobs {"inline":i}
//	                         [pinned: A's client pins O before the daemon
//	                         handles it, as a get of its own put does]
//	A submit                 A's client counts a pipelined put it never sends
//	A lease WANT [NEED]      A's lease is replaced by one of WANT bytes (lease.go)
//	A adopt B:OFF:SIZE[:K]...  A names blobs carved from its lease: B at OFF
//	                         bytes from the lease's start, with the next
//	                         unused id of the lease's block (or its K-th)
//	delete X... [force] [deep] [trim]
//	persist O | name N O | unname N | clear
//	expect refs B N          references to B (live or zombie; 0 if freed)
//	expect exists X yes|no   X is visible
//	expect zombie B yes|no   B is deleted but still referenced
//	expect state B STATE     B's state: unsealed, sealed, zombie, freed (states.go)
//	expect used N            bytes allocated to blobs
//	expect leased N          bytes the sessions lease
//	expect objects N | expect blobs N   live objects / live blobs
//	expect name N O|none     what name N resolves to
//	expect holds N           holds of all sessions (pins of deleted ids)
//	expect hold A X yes|no   A holds X for a pin
//	expect handled A N       the pipelined puts of A the daemon counted
//	expect published X yes|no  X has a directory entry
//
// Names of blobs and objects stand for their ids; "empty" is the empty blob
// and a literal "o…" id stands for itself.
//
// Sessions open at their first use. A step that must fail ends with
// "-> Code" (a status code name, e.g. ObjectSealed); any other step must
// succeed.
func TestTraces(t *testing.T) {
	files, err := filepath.Glob("testdata/traces/*.txt")
	if err != nil || len(files) == 0 {
		t.Fatalf("no traces: %v", err)
	}
	for _, file := range files {
		t.Run(strings.TrimSuffix(filepath.Base(file), ".txt"), func(t *testing.T) {
			runTrace(t, file)
		})
	}
}

type traceRun struct {
	t        *testing.T
	s        *Store
	sessions map[string]*Session
	closed   map[string]bool
	ids      map[string]ids.ObjectID
	leases   map[string]traceLease
	blobs    map[ids.ObjectID]*blob // every blob the trace made, freed ones too
	pins     map[string]*shm.PinView
	slots    map[string]map[ids.ObjectID]uint64 // each session's pin slot of an id
	where    string                             // file:line of the step running
}

// traceLease is a session's last lease grant and the next id index to use.
type traceLease struct {
	grant Lease
	next  uint64
}

func (r *traceRun) fatalf(format string, args ...any) {
	r.t.Helper()
	r.t.Fatalf("%s: "+format, append([]any{r.where}, args...)...)
}

func runTrace(t *testing.T, file string) {
	r := &traceRun{t: t, sessions: map[string]*Session{}, closed: map[string]bool{}, ids: map[string]ids.ObjectID{},
		leases: map[string]traceLease{}, blobs: map[ids.ObjectID]*blob{}, pins: map[string]*shm.PinView{},
		slots: map[string]map[ids.ObjectID]uint64{}}
	s, err := New(Config{Size: 1 << 20, Observer: r})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	r.s = s
	defer func() {
		for _, ss := range r.sessions {
			ss.Close()
		}
	}()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		want := ""
		if i := strings.LastIndex(line, " -> "); i >= 0 {
			want = strings.TrimSpace(line[i+4:])
			line = strings.TrimSpace(line[:i])
		}
		r.where = fmt.Sprintf("%s:%d", file, n)
		err := r.step(line)
		switch got := status.CodeOf(err); {
		case want == "" && err != nil:
			t.Fatalf("%s:%d: %s: %v", file, n, line, err)
		case want != "" && got.String() != want:
			t.Fatalf("%s:%d: %s: got %v (%v), want %s", file, n, line, got, err, want)
		}
		if err := s.CheckInvariants(); err != nil {
			t.Fatalf("%s:%d: after %s: %v", file, n, line, err)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
}

// StoreEvent remembers every blob created, so that its state can be
// expected after it is freed. It runs under the store's lock.
func (r *traceRun) StoreEvent(e Event) {
	if e.Kind == EventCreated && e.ID.IsBlob() {
		r.blobs[e.ID] = r.s.blobs[e.ID]
	}
}

// id returns the id a trace name stands for.
func (r *traceRun) id(name string) ids.ObjectID {
	if name == "empty" {
		return ids.EmptyBlob
	}
	id, ok := r.ids[name]
	if !ok {
		if id, err := ids.Parse(name); err == nil {
			return id // a literal id, e.g. of nothing stored
		}
		r.fatalf("trace uses %q before creating it", name)
	}
	return id
}

func (r *traceRun) idList(names []string) []ids.ObjectID {
	out := make([]ids.ObjectID, len(names))
	for i, n := range names {
		out[i] = r.id(n)
	}
	return out
}

func (r *traceRun) number(text string) uint64 {
	n, err := strconv.ParseUint(text, 10, 64)
	if err != nil {
		r.fatalf("bad number %q", text)
	}
	return n
}

func (r *traceRun) session(name string) *Session {
	if r.closed[name] {
		r.fatalf("session %s is used after its close", name)
	}
	ss, ok := r.sessions[name]
	if !ok {
		ss = r.s.NewSession()
		r.sessions[name] = ss
	}
	return ss
}

// step runs one line and returns the store's error.
func (r *traceRun) step(line string) error {
	f := strings.Fields(line)
	switch f[0] {
	case "delete":
		var opt DeleteOptions
		var idl []ids.ObjectID
		for _, a := range f[1:] {
			switch a {
			case "force":
				opt.Force = true
			case "deep":
				opt.Deep = true
			case "trim":
				opt.MemoryTrim = true
			default:
				idl = append(idl, r.id(a))
			}
		}
		r.s.Delete(idl, opt)
		return nil
	case "persist":
		return r.s.Persist(r.id(f[1]))
	case "name":
		return r.s.PutName(f[1], r.id(f[2]))
	case "unname":
		_ = r.s.DropName(f[1])
		return nil
	case "clear":
		r.s.Clear()
		return nil
	case "rescan":
		r.s.RescanPins()
		return nil
	case "expect":
		r.expect(f[1:])
		return nil
	}
	ss := r.session(f[0])
	args := f[2:]
	switch f[1] {
	case "create":
		p, err := ss.CreateBuffer(r.number(args[1]))
		if err == nil {
			r.ids[args[0]] = p.ID
		}
		return err
	case "seal":
		return ss.Seal(r.id(args[0]))
	case "drop":
		return ss.DropBuffer(r.id(args[0]))
	case "shrink":
		return ss.ShrinkBuffer(r.id(args[0]), r.number(args[1]))
	case "get":
		_, err := ss.GetBuffers(r.idList(args), false)
		return err
	case "getdata":
		_, _, _, err := ss.GetDataWithBuffers(r.idList(args))
		return err
	case "incref":
		return ss.IncreaseReferenceCount(r.idList(args))
	case "release":
		return ss.Release(r.idList(args)...)
	case "put":
		tree := strings.TrimSpace(strings.SplitN(line, " ", 4)[3])
		tree = os.Expand(tree, func(name string) string { return r.id(name).String() })
		c, err := ss.CreateData([]byte(tree), nil)
		if err == nil {
			r.ids[args[0]] = c.ID
		}
		return err
	case "lease":
		need := uint64(0)
		if len(args) > 1 {
			need = r.number(args[1])
		}
		g, err := ss.Lease(r.number(args[0]), need)
		if err == nil {
			r.leases[f[0]] = traceLease{grant: g}
		}
		return err
	case "pin":
		slot, ok := r.pinView(f[0]).Set(uint64(r.id(args[0])))
		if !ok {
			r.fatalf("no free pin slot")
		}
		if r.slots[f[0]] == nil {
			r.slots[f[0]] = map[ids.ObjectID]uint64{}
		}
		r.slots[f[0]][r.id(args[0])] = slot
		return nil
	case "unpin":
		slot, ok := r.slots[f[0]][r.id(args[0])]
		if !ok {
			r.fatalf("%s has no pin of %s", f[0], args[0])
		}
		r.pinView(f[0]).Clear(slot)
		delete(r.slots[f[0]], r.id(args[0]))
		return nil
	case "submit":
		r.pinView(f[0]).Submit()
		return nil
	case "pput":
		pins := r.pinView(f[0])
		pinned := args[len(args)-1] == "pinned"
		if pinned {
			args = args[:len(args)-1]
		}
		bs := r.carve(f[0], args[2:])
		root := (bs[len(bs)-1].ID + 1) &^ ids.BlobBit
		r.ids[args[0]] = root
		pins.Submit()
		if pinned {
			if err := r.step(f[0] + " pin " + args[0]); err != nil {
				return err
			}
		}
		_, err := ss.CreateLeased([]byte(args[1]), bs, root, true)
		r.s.mu.Lock()
		next := ss.lease.next // past the root, refused or not, as the client's view
		r.s.mu.Unlock()
		tl := r.leases[f[0]]
		tl.next = uint64(next - tl.grant.FirstID)
		r.leases[f[0]] = tl
		return err
	case "adopt":
		before := r.leases[f[0]]
		err := ss.AdoptLeaseBlobs(r.carve(f[0], args))
		if err != nil {
			r.leases[f[0]] = before // a refused adoption takes no ids of the lease
		}
		return err
	case "close":
		ss.Close()
		r.closed[f[0]] = true
		return nil
	}
	r.fatalf("unknown trace step %q", line)
	return nil
}

// pinView returns the client's view of session name's pin page, made at
// its first use.
func (r *traceRun) pinView(name string) *shm.PinView {
	if v, ok := r.pins[name]; ok {
		return v
	}
	fd, err := r.session(name).AttachPins()
	if err != nil {
		r.fatalf("attach pins: %v", err)
	}
	m, err := shm.Map(fd, shm.PinPageSize, true)
	_ = unix.Close(fd)
	if err != nil {
		r.fatalf("map pins: %v", err)
	}
	r.t.Cleanup(func() { _ = m.Close() })
	v, err := shm.NewPinView(m.Bytes())
	if err != nil {
		r.fatalf("pin view: %v", err)
	}
	r.pins[name] = v
	return v
}

// carve turns B:OFF:SIZE[:K] arguments into blobs of session name's lease,
// as adopt does, and remembers their ids.
func (r *traceRun) carve(name string, args []string) []LeaseBlob {
	tl := r.leases[name]
	var bs []LeaseBlob
	for _, a := range args {
		p := strings.Split(a, ":")
		if len(p) < 3 {
			r.fatalf("want B:OFF:SIZE[:K], not %q", a)
		}
		k := tl.next
		if len(p) > 3 {
			k = r.number(p[3])
		}
		tl.next = k + 1
		id := tl.grant.FirstID + ids.ObjectID(k)
		r.ids[p[0]] = id
		bs = append(bs, LeaseBlob{ID: id, Offset: tl.grant.Offset + r.number(p[1]), Size: r.number(p[2])})
	}
	r.leases[name] = tl
	return bs
}

func (r *traceRun) expect(f []string) {
	s := r.s
	s.mu.Lock()
	defer s.mu.Unlock()
	yes := func(text string) bool { return text == "yes" }
	var got, want string
	switch f[0] {
	case "refs":
		id := r.id(f[1])
		n := 0
		if b, ok := s.blobs[id]; ok {
			n = b.refs
		} else if b, ok := s.zombies[id]; ok {
			n = b.refs
		}
		got, want = strconv.Itoa(n), f[2]
	case "exists":
		got, want = strconv.FormatBool(s.existsLocked(r.id(f[1]))), strconv.FormatBool(yes(f[2]))
	case "state":
		b, ok := r.blobs[r.id(f[1])]
		if r.id(f[1]) == ids.EmptyBlob {
			b, ok = emptyBlob, true
		}
		got, want = "unknown", f[2]
		if ok {
			got = b.state.String()
		}
	case "holds":
		got, want = strconv.Itoa(s.holdCount), f[1]
	case "hold":
		ss := r.sessions[f[1]]
		_, ok := ss.holds[r.id(f[2])]
		got, want = strconv.FormatBool(ok), strconv.FormatBool(yes(f[3]))
	case "handled":
		got, want = strconv.FormatUint(r.sessions[f[1]].piped, 10), f[2]
	case "published":
		ok := false
		if s.dir != nil {
			_, ok = s.dir.entries[r.id(f[1])]
		}
		got, want = strconv.FormatBool(ok), strconv.FormatBool(yes(f[2]))
	case "zombie":
		_, ok := s.zombies[r.id(f[1])]
		got, want = strconv.FormatBool(ok), strconv.FormatBool(yes(f[2]))
	case "used":
		used, _ := s.usageLocked()
		got, want = strconv.FormatUint(used, 10), f[1]
	case "leased":
		got, want = strconv.FormatUint(s.leased, 10), f[1]
	case "objects":
		got, want = strconv.Itoa(len(s.objects)), f[1]
	case "blobs":
		got, want = strconv.Itoa(len(s.blobs)), f[1]
	case "name":
		got = "none"
		if id, err := s.meta.GetName(f[1]); err == nil {
			got = id.String()
		}
		want = f[2]
		if want != "none" {
			want = r.id(want).String()
		}
	default:
		r.fatalf("unknown expectation %v", f)
	}
	if got != want {
		r.fatalf("expect %s: got %s, want %s", strings.Join(f, " "), got, want)
	}
}
