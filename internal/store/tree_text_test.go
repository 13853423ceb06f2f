package store

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/status"
	treetext "github.com/v6d-io/v6d-go/internal/tree"
)

// TestTreeTextIsJSONForEveryKey: a tree whose keys and values hold control
// characters, U+007F, U+2028 and escapes comes back, from Tree and GetData
// (and so the directory record, which holds the same text), as valid JSON.
func TestTreeTextIsJSONForEveryKey(t *testing.T) {
	s := newStore(t)
	ss := s.NewSession()
	defer ss.Close()
	keys := []string{"\x7f", "\x01", "a\u2028b", "q\"uote", "\u00e9", "tab\t"}
	for _, k := range keys {
		b := blobOf(t, ss, 8)
		key, _ := json.Marshal(k)
		text := fmt.Sprintf(`{"typename":"T","field%s":"v\u0041\/\u007f","m":{"typename":"M",%s:{"id":"%v"}},%s:{"id":"%v"}}`,
			key[1:len(key)-1], key, b, key, b)
		id := create(t, ss, text, b)
		tree, ok := s.Tree(id)
		if !ok {
			t.Fatalf("%v is gone", id)
		}
		checkTreeJSON(t, tree, k)
		if canon, err := treetext.Canonical(tree); err != nil || string(canon) != string(tree) {
			t.Fatalf("the tree of key %q is not canonical: %s\nCanonical: %s, %v", k, tree, canon, err)
		}
		all, _, err := s.GetData([]ids.ObjectID{id})
		if err != nil {
			t.Fatal(err)
		}
		checkTreeJSON(t, all, k)
	}
}

func checkTreeJSON(t *testing.T, text []byte, key string) {
	t.Helper()
	if !json.Valid(text) {
		t.Fatalf("the tree of key %q is not JSON: %s", key, text)
	}
}

// TestTreeTextRefusesWhatJSONCannotCarry: text that is not UTF-8, holds
// a lone surrogate escape, or names a member as a field the daemon sets, is
// refused with a clear error, not stored as something else.
func TestTreeTextRefusesWhatJSONCannotCarry(t *testing.T) {
	s := newStore(t)
	ss := s.NewSession()
	defer ss.Close()
	for _, text := range []string{
		"{\"typename\":\"T\",\"a\":\"\xff\"}",
		"{\"typename\":\"T\",\"\xc3\":1}",
		`{"typename":"T","a":"\ud800"}`,
		`{"typename":"T","m":{"typename":"M","a":"\udc00"}}`,
		`{"typename":"T","nbytes":{"typename":"M"}}`, // the daemon sets nbytes: the key would be there twice
		`{"typename":"T","m":{"typename":"M","id":{"typename":"N"}}}`,
	} {
		_, err := ss.CreateData(json.RawMessage(text), nil)
		if status.CodeOf(err) != status.MetaTreeInvalid {
			t.Errorf("%q: %v, want MetaTreeInvalid", text, err)
		}
	}
}
