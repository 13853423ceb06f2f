package ctl

import (
	"encoding/json"
	"flag"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/v6d-io/v6d-go/internal/client"
	"github.com/v6d-io/v6d-go/internal/ids"
)

// listed is one object of ls and watch.
type listed struct {
	ID        string   `json:"id"`
	Typename  string   `json:"typename"`
	Nbytes    uint64   `json:"nbytes"`
	Instance  uint64   `json:"instance_id"`
	Persisted bool     `json:"persisted"`
	Names     []string `json:"names,omitempty"`
}

// listQuery is what ls and watch ask the daemon.
type listQuery struct {
	typ     string
	regex   bool
	limit   uint64
	all     bool   // also the objects and blobs inside listed objects
	pattern string // glob over ids and names, matched here
}

func (q *listQuery) addFlags(fs *flag.FlagSet) {
	fs.StringVar(&q.typ, "type", "*", "typename pattern (a glob, or a regular expression with --regex), e.g. 'vineyard::Tensor<*>'")
	fs.BoolVar(&q.regex, "regex", false, "--type is a regular expression (matching the whole typename)")
	fs.Uint64Var(&q.limit, "limit", 0, "list at most this many objects (0: all)")
	fs.BoolVar(&q.all, "all", false, "also list the objects and blobs inside listed objects (by default only the outermost)")
}

// list returns the objects the query matches, sorted by id.
func (q *listQuery) list(c *client.Client) ([]listed, error) {
	if q.pattern != "" {
		if _, err := path.Match(q.pattern, ""); err != nil {
			return nil, usagef("PATTERN %q: %v", q.pattern, err)
		}
	}
	limit := q.limit
	if q.pattern != "" {
		limit = 0 // the daemon's limit would count objects PATTERN then drops
	}
	raw, err := c.List(q.typ, q.regex, limit)
	if err != nil {
		return nil, err
	}
	var trees map[string]json.RawMessage
	if err := json.Unmarshal(raw, &trees); err != nil {
		return nil, fmt.Errorf("malformed list reply: %w", err)
	}
	names, err := c.ListNames("*", false, 0)
	if err != nil {
		return nil, err
	}
	byID := map[ids.ObjectID][]string{}
	for name, id := range names {
		byID[id] = append(byID[id], name)
	}
	decoded := make(map[string]node, len(trees))
	members := map[ids.ObjectID]bool{} // objects and blobs inside the listed objects
	for key, raw := range trees {
		t, err := decodeTree(raw)
		if err != nil {
			return nil, fmt.Errorf("object %s: %w", key, err)
		}
		decoded[key] = t
		t.eachMember(func(m node) { members[m.id()] = true })
	}
	out := make([]listed, 0, len(trees))
	for key, t := range decoded {
		if !q.all && members[t.id()] {
			continue
		}
		id, err := ids.Parse(key)
		if err != nil {
			id = t.id()
		}
		l := listed{ID: id.String(), Typename: t.typename(), Nbytes: t.uint("nbytes"),
			Instance: t.uint("instance_id"), Persisted: !t.boolean("transient") && t["transient"] != nil,
			Names: byID[id]}
		sort.Strings(l.Names)
		if q.pattern != "" && !matchAny(q.pattern, append([]string{l.ID}, l.Names...)) {
			continue
		}
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	if q.limit > 0 && uint64(len(out)) > q.limit {
		out = out[:q.limit]
	}
	return out, nil
}

func matchAny(pattern string, ss []string) bool {
	for _, s := range ss {
		if ok, _ := path.Match(pattern, s); ok {
			return true
		}
	}
	return false
}

func setupLs(fs *flag.FlagSet, e *env) func([]string) error {
	q := &listQuery{}
	q.addFlags(fs)
	return func(args []string) error {
		if len(args) > 1 {
			return usagef("ls takes at most one PATTERN, got %d arguments", len(args))
		}
		if len(args) == 1 {
			q.pattern = args[0]
		}
		c, err := e.connect()
		if err != nil {
			return err
		}
		defer c.Close()
		objs, err := q.list(c)
		if err != nil {
			return err
		}
		if e.format == "json" {
			return writeJSON(e.stdout, objs)
		}
		rows := make([][]string, 0, len(objs))
		for _, o := range objs {
			rows = append(rows, listRow(o))
		}
		table(e.stdout, []string{"ID", "TYPE", "SIZE", "INSTANCE", "PERSISTED", "NAMES"}, rows)
		return nil
	}
}

func listRow(o listed) []string {
	persisted := "no"
	if o.Persisted {
		persisted = "yes"
	}
	return []string{o.ID, o.Typename, humanBytes(o.Nbytes), strconv.FormatUint(o.Instance, 10), persisted,
		strings.Join(o.Names, ",")}
}
