package store

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

// TestTreeFields checks how a created tree's fields come back: sorted by
// key, members after the scalar fields, the last of a repeated key counting
// (a scalar may replace a member and the other way round), escaped keys
// decoded and written back escaped, the daemon's fields added and a
// client's "id" replaced.
func TestTreeFields(t *testing.T) {
	s := newStore(t)
	ss := s.NewSession()
	defer ss.Close()
	b := blobOf(t, ss, 64)
	id := create(t, ss, fmt.Sprintf(`{"typename":"t","z":1,"a\u0041":"x","m":{"id":"%v"},"m":2,`+
		`"n":3,"n":{"id":"%v"},"z":"last","id":"o1","nbytes":64,"k\"q":true}`, b, b), b)
	tree, ok := s.Tree(id)
	if !ok {
		t.Fatal("tree not found")
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(tree, &got); err != nil {
		t.Fatalf("tree %s: %v", tree, err)
	}
	for key, want := range map[string]string{
		"typename": `"t"`, "z": `"last"`, "aA": `"x"`, "m": `2`, "nbytes": `64`, `k"q`: `true`,
		"id": `"` + id.String() + `"`, "transient": `true`, "instance_id": `0`, "signature": "",
	} {
		if string(got["n"]) == "" || !strings.Contains(string(got["n"]), b.String()) {
			t.Fatalf("member n is %s, want the blob %v", got["n"], b)
		}
		if key == "signature" {
			if len(got[key]) == 0 || got[key][0] < '0' || got[key][0] > '9' {
				t.Errorf("signature %s (tree %s)", got[key], tree)
			}
			continue
		}
		if string(got[key]) != want {
			t.Errorf("%s: %s, want %s (tree %s)", key, got[key], want, tree)
		}
	}
	// Order: scalar fields sorted by key, then the members sorted by key.
	var keys []string
	dec := json.NewDecoder(strings.NewReader(string(tree)))
	if _, err := dec.Token(); err != nil {
		t.Fatal(err)
	}
	for dec.More() {
		k, err := dec.Token()
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, k.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatal(err)
		}
	}
	want := []string{"aA", "id", "instance_id", `k"q`, "m", "nbytes", "signature", "transient", "typename", "z", "n"}
	if fmt.Sprint(keys) != fmt.Sprint(want) {
		t.Fatalf("keys %q, want %q", keys, want)
	}
	// A shallow copy keeps the fields, drops the name, takes new ones.
	if err := s.Persist(id); err != nil {
		t.Fatal(err)
	}
	if err := s.PutName("named", id); err != nil {
		t.Fatal(err)
	}
	cp, err := s.ShallowCopy(id, json.RawMessage(`{"extra":5,"z":6}`))
	if err != nil {
		t.Fatal(err)
	}
	tree, _ = s.Tree(cp)
	got = nil
	if err := json.Unmarshal(tree, &got); err != nil {
		t.Fatal(err)
	}
	if string(got["extra"]) != "5" || string(got["z"]) != "6" || got["__name"] != nil || string(got["aA"]) != `"x"` ||
		string(got["id"]) != `"`+cp.String()+`"` {
		t.Fatalf("shallow copy %s", tree)
	}
	_ = s.DropName("named")
	tree, _ = s.Tree(id)
	if strings.Contains(string(tree), "__name") {
		t.Fatalf("name kept after drop: %s", tree)
	}
}
