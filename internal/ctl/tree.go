package ctl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/v6d-io/v6d-go/internal/client"
	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/status"
)

// node is a metadata tree decoded for reading: fields keep their JSON
// values (numbers as json.Number), members are nodes of their own.
type node map[string]any

func decodeTree(raw []byte) (node, error) {
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var n node
	if err := d.Decode(&n); err != nil {
		return nil, fmt.Errorf("malformed metadata tree: %w", err)
	}
	return n, nil
}

func (n node) str(key string) string {
	s, _ := n[key].(string)
	return s
}

func (n node) uint(key string) uint64 {
	switch v := n[key].(type) {
	case json.Number:
		u, _ := strconv.ParseUint(v.String(), 10, 64)
		return u
	case string:
		u, _ := strconv.ParseUint(v, 10, 64)
		return u
	case bool:
		if v {
			return 1
		}
	}
	return 0
}

func (n node) boolean(key string) bool {
	switch v := n[key].(type) {
	case bool:
		return v
	case json.Number:
		return v.String() != "0"
	case string:
		return v == "true" || v == "1"
	}
	return false
}

func (n node) id() ids.ObjectID {
	id, err := ids.Parse(n.str("id"))
	if err != nil {
		return ids.Invalid
	}
	return id
}

func (n node) typename() string { return n.str("typename") }

// members returns the member objects of n, sorted by key.
func (n node) members() (keys []string, out []node) {
	for k, v := range n {
		if _, ok := v.(map[string]any); ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		m, _ := n[k].(map[string]any)
		out = append(out, node(m))
	}
	return keys, out
}

// isBlob reports whether n is a blob (a leaf whose bytes live in a daemon).
func (n node) isBlob() bool {
	return n.typename() == "vineyard::Blob" || n.id().IsBlob()
}

// blobs returns every distinct blob of the tree, in the order first met.
func (n node) blobs() []node {
	var out []node
	seen := map[ids.ObjectID]bool{}
	var walk func(m node)
	walk = func(m node) {
		if m.isBlob() {
			if id := m.id(); !seen[id] {
				seen[id] = true
				out = append(out, m)
			}
			return
		}
		_, ms := m.members()
		for _, c := range ms {
			walk(c)
		}
	}
	walk(n)
	return out
}

// eachMember calls f for every object and blob inside n (not n itself).
func (n node) eachMember(f func(node)) {
	_, ms := n.members()
	for _, m := range ms {
		f(m)
		m.eachMember(f)
	}
}

// resolve turns an argument into an object id: an id ("o…" or decimal),
// else a name.
func resolve(c *client.Client, arg string) (ids.ObjectID, error) {
	if arg == "" {
		return 0, usagef("an empty object id or name")
	}
	if id, err := ids.Parse(arg); err == nil && looksLikeID(arg) {
		return id, nil
	}
	id, err := c.GetName(arg, false, 0)
	if err != nil {
		if status.CodeOf(err) == status.ObjectNotExists || status.CodeOf(err) == status.MetaTreeNameNotExists {
			return 0, status.Errorf(status.ObjectNotExists, "%q is neither an object id (o followed by 16 hex digits) nor a name", arg)
		}
		return 0, err
	}
	return id, nil
}

// looksLikeID reports whether arg is written as an id: "o" and 16 hex
// digits, or all decimal digits.
func looksLikeID(arg string) bool {
	if len(arg) == 17 && arg[0] == 'o' {
		_, err := strconv.ParseUint(arg[1:], 16, 64)
		return err == nil
	}
	_, err := strconv.ParseUint(arg, 10, 64)
	return err == nil
}

// writeJSON prints v as indented JSON.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false) // typenames hold < and >
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// humanBytes writes n bytes as 1.5 KiB, 3.0 MiB (exact below 1 KiB).
func humanBytes(n uint64) string {
	if n < 1024 {
		return strconv.FormatUint(n, 10) + " B"
	}
	units := []string{"KiB", "MiB", "GiB", "TiB", "PiB"}
	v := float64(n) / 1024
	i := 0
	for v >= 1024 && i < len(units)-1 {
		v /= 1024
		i++
	}
	return strconv.FormatFloat(v, 'f', 1, 64) + " " + units[i]
}

// table prints rows as aligned columns.
func table(w io.Writer, header []string, rows [][]string) {
	width := make([]int, len(header))
	for i, h := range header {
		width[i] = len(h)
	}
	for _, r := range rows {
		for i, c := range r {
			width[i] = max(width[i], len(c))
		}
	}
	line := func(r []string) {
		var b strings.Builder
		for i, c := range r {
			if i == len(r)-1 {
				b.WriteString(c)
				break
			}
			b.WriteString(c)
			b.WriteString(strings.Repeat(" ", width[i]-len(c)+2))
		}
		fmt.Fprintln(w, strings.TrimRight(b.String(), " "))
	}
	line(header)
	for _, r := range rows {
		line(r)
	}
}
