package ctl

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/v6d-io/v6d-go/internal/client"
)

// blobPlace is where one blob of an object is.
type blobPlace struct {
	ID       string `json:"id"`
	Member   string `json:"member"` // the path of keys from the root
	Size     uint64 `json:"size"`
	Instance uint64 `json:"instance_id"`
	// Local: the blob's bytes are in the daemon this command talks to.
	Local bool `json:"local"`
}

// inspection is inspect's JSON output.
type inspection struct {
	ID        string          `json:"id"`
	Typename  string          `json:"typename"`
	Nbytes    uint64          `json:"nbytes"`
	Instance  uint64          `json:"instance_id"`
	Persisted bool            `json:"persisted"`
	Names     []string        `json:"names,omitempty"`
	Blobs     []blobPlace     `json:"blobs"`
	BlobBytes uint64          `json:"blob_bytes"`
	Tree      json.RawMessage `json:"tree"`
}

func setupInspect(fs *flag.FlagSet, e *env) func([]string) error {
	return func(args []string) error {
		if len(args) != 1 {
			return usagef("inspect takes one ID or NAME, got %d arguments", len(args))
		}
		c, err := e.connect()
		if err != nil {
			return err
		}
		defer c.Close()
		id, err := resolve(c, args[0])
		if err != nil {
			return err
		}
		raw, err := c.GetMetadata(id)
		if err != nil {
			return err
		}
		t, err := decodeTree(raw)
		if err != nil {
			return err
		}
		names, err := namesOf(c, id.String())
		if err != nil {
			return err
		}
		here := c.InstanceID()
		in := inspection{ID: id.String(), Typename: t.typename(), Nbytes: t.uint("nbytes"),
			Instance: t.uint("instance_id"), Persisted: t["transient"] != nil && !t.boolean("transient"),
			Names: names, Blobs: []blobPlace{}, Tree: raw}
		placeBlobs(t, "", here, map[string]bool{}, &in)
		if e.format == "json" {
			return writeJSON(e.stdout, in)
		}
		w := e.stdout
		fmt.Fprintf(w, "%s  %s  %s", in.ID, in.Typename, humanBytes(in.Nbytes))
		if len(names) > 0 {
			fmt.Fprintf(w, "  names: %s", strings.Join(names, ","))
		}
		persisted := "transient"
		if in.Persisted {
			persisted = "persisted"
		}
		fmt.Fprintf(w, "\n  instance %d (connected to %d), %s\n", in.Instance, here, persisted)
		printFields(w, t, "  ")
		printMembers(w, t, "  ", here)
		local := 0
		for _, b := range in.Blobs {
			if b.Local {
				local++
			}
		}
		fmt.Fprintf(w, "blobs: %d, %s; %d on this instance (%d), %d elsewhere\n",
			len(in.Blobs), humanBytes(in.BlobBytes), local, here, len(in.Blobs)-local)
		return nil
	}
}

// namesOf returns the names that point to the object id.
func namesOf(c *client.Client, id string) ([]string, error) {
	all, err := c.ListNames("*", false, 0)
	if err != nil {
		return nil, err
	}
	var out []string
	for name, oid := range all {
		if oid.String() == id {
			out = append(out, name)
		}
	}
	sort.Strings(out)
	return out, nil
}

func placeBlobs(t node, at string, here uint64, seen map[string]bool, in *inspection) {
	if t.isBlob() {
		id := t.id().String()
		if seen[id] {
			return
		}
		seen[id] = true
		size := t.uint("length")
		if _, ok := t["length"]; !ok {
			size = t.uint("nbytes")
		}
		inst := t.uint("instance_id")
		in.Blobs = append(in.Blobs, blobPlace{ID: id, Member: at, Size: size, Instance: inst, Local: inst == here})
		in.BlobBytes += size
		return
	}
	keys, ms := t.members()
	for i, m := range ms {
		p := keys[i]
		if at != "" {
			p = at + "." + p
		}
		placeBlobs(m, p, here, seen, in)
	}
}

// printFields prints the scalar fields of t that are not bookkeeping.
func printFields(w io.Writer, t node, indent string) {
	var keys []string
	for k, v := range t {
		if _, member := v.(map[string]any); member {
			continue
		}
		switch k {
		case "id", "typename", "nbytes", "instance_id", "transient", "signature", "global":
			continue
		}
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := fmt.Sprint(t[k])
		if len(v) > 100 {
			v = v[:97] + "..."
		}
		fmt.Fprintf(w, "%s%s = %s\n", indent, k, v)
	}
}

// printMembers prints the member tree of t.
func printMembers(w io.Writer, t node, indent string, here uint64) {
	keys, ms := t.members()
	for i, m := range ms {
		if m.isBlob() {
			where := fmt.Sprintf("instance %d", m.uint("instance_id"))
			if m.uint("instance_id") == here {
				where += " (here)"
			}
			size := m.uint("length")
			if _, ok := m["length"]; !ok {
				size = m.uint("nbytes")
			}
			fmt.Fprintf(w, "%s%s: blob %s  %s  %s\n", indent, keys[i], m.str("id"), humanBytes(size), where)
			continue
		}
		fmt.Fprintf(w, "%s%s: %s %s  %s\n", indent, keys[i], m.typename(), m.str("id"), humanBytes(m.uint("nbytes")))
		printMembers(w, m, indent+"  ", here)
	}
}
