package ctl

import (
	"encoding/json"
	"flag"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/protocol"
)

func setupDelete(fs *flag.FlagSet, e *env) func([]string) error {
	force := fs.Bool("force", false, "also delete every object that uses these")
	deep := fs.Bool("deep", false, "also delete members no other object uses")
	return func(args []string) error {
		if len(args) == 0 {
			return usagef("delete takes one or more IDs or NAMES")
		}
		c, err := e.connect()
		if err != nil {
			return err
		}
		defer c.Close()
		idl := make([]ids.ObjectID, 0, len(args))
		for _, a := range args {
			id, err := resolve(c, a)
			if err != nil {
				return err
			}
			ok, err := c.Exists(id)
			if err != nil {
				return err
			}
			if !ok {
				return &notFound{id}
			}
			idl = append(idl, id)
		}
		blobs, err := c.Delete(idl, *force, *deep, false)
		if err != nil {
			return err
		}
		var left []string
		for _, id := range idl {
			if ok, err := c.Exists(id); err == nil && ok {
				left = append(left, id.String())
			}
		}
		if e.format == "json" {
			out := struct {
				Deleted []string `json:"deleted"`
				Kept    []string `json:"kept,omitempty"`
				Blobs   int      `json:"blobs_freed"`
			}{Deleted: []string{}, Kept: left, Blobs: len(blobs)}
			for _, id := range idl {
				if !contains(left, id.String()) {
					out.Deleted = append(out.Deleted, id.String())
				}
			}
			if err := writeJSON(e.stdout, out); err != nil {
				return err
			}
		} else {
			for _, id := range idl {
				if !contains(left, id.String()) {
					fmt.Fprintf(e.stdout, "deleted %s\n", id)
				}
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("not deleted (another object uses them; --force deletes those too): %v", left)
		}
		return nil
	}
}

// notFound is a missing object named on the command line: exit code 4.
type notFound struct{ id ids.ObjectID }

func (e *notFound) Error() string { return fmt.Sprintf("object %v does not exist", e.id) }

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

// statusReport is status's JSON output.
type statusReport struct {
	Endpoint string                     `json:"endpoint"`
	Version  string                     `json:"version"`
	Instance protocol.InstanceStatus    `json:"instance"`
	Cluster  map[string]json.RawMessage `json:"cluster"`
}

func setupStatus(fs *flag.FlagSet, e *env) func([]string) error {
	return func(args []string) error {
		if len(args) != 0 {
			return usagef("status takes no arguments")
		}
		c, err := e.connect()
		if err != nil {
			return err
		}
		defer c.Close()
		st, err := c.InstanceStatus()
		if err != nil {
			return err
		}
		raw, err := c.ClusterMeta()
		if err != nil {
			return err
		}
		rep := statusReport{Endpoint: c.Socket(), Version: c.DaemonVersion(), Instance: st}
		if err := json.Unmarshal(raw, &rep.Cluster); err != nil {
			return fmt.Errorf("malformed cluster_meta reply: %w", err)
		}
		if e.format == "json" {
			return writeJSON(e.stdout, rep)
		}
		w := e.stdout
		fmt.Fprintf(w, "instance %d at %s (vineyardd %s, %s)\n", st.InstanceID, rep.Endpoint, rep.Version, st.Deployment)
		pct := 0.0
		if st.MemoryLimit > 0 {
			pct = 100 * float64(st.MemoryUsage) / float64(st.MemoryLimit)
		}
		fmt.Fprintf(w, "  memory: %s used of %s (%.1f%%), %s leased to clients\n",
			humanBytes(st.MemoryUsage), humanBytes(st.MemoryLimit), pct, humanBytes(st.MemoryLeased))
		if st.SpilledObjects > 0 || st.SpilledBytes > 0 {
			fmt.Fprintf(w, "  spilled to disk: %d blobs, %s\n", st.SpilledObjects, humanBytes(st.SpilledBytes))
		}
		fmt.Fprintf(w, "  connections: %d IPC, %d RPC; %d deferred requests; %d metadata changes waiting for etcd\n",
			st.IPCConnections, st.RPCConnections, st.DeferredRequests, st.MetaPending)
		keys := make([]string, 0, len(rep.Cluster))
		for k := range rep.Cluster {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		fmt.Fprintf(w, "cluster: %d instance(s)\n", len(keys))
		rows := make([][]string, 0, len(keys))
		for _, k := range keys {
			var inst map[string]any
			_ = json.Unmarshal(rep.Cluster[k], &inst)
			row := []string{k}
			for _, f := range []string{"hostname", "ipc_socket", "rpc_endpoint", "memory_usage", "memory_limit"} {
				v := inst[f]
				switch x := v.(type) {
				case float64:
					if f == "memory_usage" || f == "memory_limit" {
						row = append(row, humanBytes(uint64(x)))
						continue
					}
					row = append(row, strconv.FormatFloat(x, 'f', -1, 64))
				case nil:
					row = append(row, "-")
				default:
					row = append(row, fmt.Sprint(x))
				}
			}
			rows = append(rows, row)
		}
		table(w, []string{"INSTANCE", "HOSTNAME", "SOCKET", "RPC", "USED", "LIMIT"}, rows)
		return nil
	}
}

func setupVersion(fs *flag.FlagSet, e *env) func([]string) error {
	return func(args []string) error {
		if len(args) != 0 {
			return usagef("version takes no arguments")
		}
		out := struct {
			Vineyardctl string `json:"vineyardctl"`
			Vineyardd   string `json:"vineyardd,omitempty"`
		}{Vineyardctl: Version}
		if e.socket != "" || e.endpoint != "" {
			c, err := e.connect()
			if err != nil {
				return err
			}
			out.Vineyardd = c.DaemonVersion()
			_ = c.Close()
		}
		if e.format == "json" {
			return writeJSON(e.stdout, out)
		}
		fmt.Fprintf(e.stdout, "vineyardctl %s\n", out.Vineyardctl)
		if out.Vineyardd != "" {
			fmt.Fprintf(e.stdout, "vineyardd %s\n", out.Vineyardd)
		}
		return nil
	}
}

func setupWatch(fs *flag.FlagSet, e *env) func([]string) error {
	q := &listQuery{}
	q.addFlags(fs)
	interval := fs.Duration("interval", time.Second, "how often to ask the daemon")
	maxEvents := fs.Int("max-events", 0, "stop after this many changes (0: run until interrupted)")
	return func(args []string) error {
		if len(args) > 1 {
			return usagef("watch takes at most one PATTERN, got %d arguments", len(args))
		}
		if len(args) == 1 {
			q.pattern = args[0]
		}
		if *interval <= 0 {
			return usagef("--interval must be positive")
		}
		c, err := e.connect()
		if err != nil {
			return err
		}
		defer c.Close()
		// The protocol has no change subscription: watch lists every
		// interval and prints the difference.
		var before map[string]listed
		events := 0
		tick := time.NewTicker(*interval)
		defer tick.Stop()
		for {
			objs, err := q.list(c)
			if err != nil {
				return err
			}
			now := make(map[string]listed, len(objs))
			for _, o := range objs {
				now[o.ID] = o
			}
			if before == nil {
				for _, o := range objs {
					if err := e.event("exists", o); err != nil {
						return err
					}
				}
			} else {
				var changes []watchEvent
				for _, o := range objs {
					old, ok := before[o.ID]
					switch {
					case !ok:
						changes = append(changes, watchEvent{"added", o})
					case old.Persisted != o.Persisted || fmt.Sprint(old.Names) != fmt.Sprint(o.Names):
						changes = append(changes, watchEvent{"changed", o})
					}
				}
				for id, o := range before {
					if _, ok := now[id]; !ok {
						changes = append(changes, watchEvent{"deleted", o})
					}
				}
				sort.Slice(changes, func(i, j int) bool { return changes[i].obj.ID < changes[j].obj.ID })
				for _, ch := range changes {
					if err := e.event(ch.kind, ch.obj); err != nil {
						return err
					}
					events++
					if *maxEvents > 0 && events >= *maxEvents {
						return nil
					}
				}
			}
			before = now
			select {
			case <-tick.C:
			case <-e.interrupt:
				return nil
			}
		}
	}
}

type watchEvent struct {
	kind string
	obj  listed
}

// event prints one line of watch: text, or one JSON object per line.
func (e *env) event(kind string, o listed) error {
	if e.format == "json" {
		enc := json.NewEncoder(e.stdout) // one object per line
		enc.SetEscapeHTML(false)
		return enc.Encode(struct {
			Event string `json:"event"`
			listed
		}{kind, o})
	}
	line := fmt.Sprintf("%-7s %s  %s  %s  instance %d", kind, o.ID, o.Typename, humanBytes(o.Nbytes), o.Instance)
	if o.Persisted {
		line += "  persisted"
	}
	if len(o.Names) > 0 {
		line += "  names: " + strings.Join(o.Names, ",")
	}
	_, err := fmt.Fprintln(e.stdout, line)
	return err
}
