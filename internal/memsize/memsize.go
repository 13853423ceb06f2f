// Package memsize reads and writes sizes of memory (the daemon's --size and
// other SIZE flags) and chooses them: the memory this process may use, from
// /proc/meminfo and its cgroup, gives the default arena size and the bound
// a size is checked against. It maps nothing (internal/shm does); the
// daemon's config (internal/server, Config.Validate and Defaults) calls it
// when it resolves defaults.
package memsize

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/bits"
	"os"
	"path"
	"strconv"
	"strings"
)

const (
	kib = 1 << 10
	mib = 1 << 20
	gib = 1 << 30
)

// unitLetters lists the unit prefixes in order of increasing power.
const unitLetters = "kmgtpe"

// ParseSize parses a size such as the daemon's --size: a decimal integer
// optionally followed by a unit, with optional spaces around either. Units
// are K, M, G, T, P, E (powers of 1000) and Ki, Mi, Gi, Ti, Pi, Ei (powers of
// 1024), each optionally followed by B ("2GB", "2GiB"); B alone means bytes.
// Unit letters are case-insensitive. "0" parses as 0; ranges are for the
// caller to check.
//
// Empty text, a sign, a fraction or an unknown unit fails with ErrSyntax; a
// value that does not fit in a uint64 fails with ErrSizeOverflow.
func ParseSize(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("%w: empty", ErrSyntax)
	}
	if t[0] == '-' {
		return 0, fmt.Errorf("%w: %q is negative", ErrSyntax, s)
	}
	digits := 0
	for digits < len(t) && t[digits] >= '0' && t[digits] <= '9' {
		digits++
	}
	if digits == 0 {
		return 0, fmt.Errorf("%w: %q does not start with a number", ErrSyntax, s)
	}
	n, err := strconv.ParseUint(t[:digits], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: %q", ErrSizeOverflow, s)
	}
	unit := strings.TrimSpace(t[digits:])
	if strings.HasPrefix(unit, ".") {
		return 0, fmt.Errorf("%w: %q: fractions are not supported, use a smaller unit (1536Mi, not 1.5Gi)", ErrSyntax, s)
	}
	mult, ok := unitMultiplier(unit)
	if !ok {
		return 0, fmt.Errorf("%w: %q: unknown unit %q (want K, M, G, T, P, E, with i for powers of 1024, optionally B)", ErrSyntax, s, unit)
	}
	hi, lo := bits.Mul64(n, mult)
	if hi != 0 {
		return 0, fmt.Errorf("%w: %q", ErrSizeOverflow, s)
	}
	return lo, nil
}

// unitMultiplier returns the number of bytes in one unit.
func unitMultiplier(unit string) (uint64, bool) {
	u := strings.ToLower(unit)
	u = strings.TrimSuffix(u, "b")
	if u == "" {
		return 1, true // "" or "B"
	}
	base := uint64(1000)
	switch {
	case len(u) == 2 && u[1] == 'i':
		base = 1024
	case len(u) != 1:
		return 0, false
	}
	power := strings.IndexByte(unitLetters, u[0])
	if power < 0 {
		return 0, false
	}
	mult := uint64(1)
	for range power + 1 {
		mult *= base
	}
	return mult, true
}

// FormatSize returns n in the shortest exact form that ParseSize reads back
// as n: "512Mi", "2G", "0", or plain bytes such as "1000001" when no unit
// divides it. Binary units win ties.
func FormatSize(n uint64) string {
	best, bestUnit := n, ""
	for i := len(unitLetters) - 1; i >= 0; i-- {
		for _, u := range []struct {
			base   uint64
			suffix string
		}{{1024, "i"}, {1000, ""}} {
			mult := uint64(1)
			for range i + 1 {
				mult *= u.base
			}
			if n != 0 && n%mult == 0 && n/mult < best {
				best, bestUnit = n/mult, strings.ToUpper(unitLetters[i:i+1])+u.suffix
			}
		}
	}
	return strconv.FormatUint(best, 10) + bestUnit
}

// DefaultSize returns the arena size to use when none is given: half of the
// memory this process may use, that is the smaller of physical memory
// (MemTotal in /proc/meminfo) and the memory limit of its cgroup (v2
// memory.max or v1 memory.limit_in_bytes, of its own cgroup and every
// ancestor), rounded down to a MiB and at least 1 MiB. It returns 1 GiB when
// none of these can be read.
func DefaultSize() uint64 {
	return defaultSize(os.DirFS("/"))
}

// defaultSize is DefaultSize reading the files from root, a view of "/".
func defaultSize(root fs.FS) uint64 {
	limit, ok := memTotal(root)
	if cg, cgOK := cgroupLimit(root); cgOK && (!ok || cg < limit) {
		limit, ok = cg, true
	}
	if !ok {
		return gib
	}
	return max(limit/2&^(mib-1), mib)
}

// memTotal reads MemTotal from /proc/meminfo, in bytes.
func memTotal(root fs.FS) (uint64, bool) { return meminfoField(root, "MemTotal:") }

// cgroupLimit returns the smallest memory limit that applies to this process
// among the cgroup v2 and v1 hierarchies mounted at /sys/fs/cgroup.
func cgroupLimit(root fs.FS) (uint64, bool) {
	v2Dirs, v1Dirs := cgroupDirs(root)
	var limit uint64
	found := false
	consider := func(file string) {
		data, err := fs.ReadFile(root, file)
		if err != nil {
			return
		}
		v, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
		if err != nil { // "max" (v2 unlimited) or unreadable
			return
		}
		if !found || v < limit {
			limit, found = v, true
		}
	}
	for _, dir := range v2Dirs {
		consider(path.Join("sys/fs/cgroup", dir, "memory.max"))
	}
	for _, dir := range v1Dirs {
		consider(path.Join("sys/fs/cgroup/memory", dir, "memory.limit_in_bytes"))
	}
	return limit, found
}

// cgroupDirs returns the cgroup v2 and v1 (memory controller) directories
// whose limits apply to this process: the roots, its own and every ancestor.
func cgroupDirs(root fs.FS) (v2Dirs, v1Dirs []string) {
	// Always look at the roots: inside a container's cgroup namespace they
	// are the container's own cgroup.
	v2Dirs = []string{"/"}
	v1Dirs = []string{"/"}
	if data, err := fs.ReadFile(root, "proc/self/cgroup"); err == nil {
		for line := range strings.Lines(string(data)) {
			// "0::/user.slice/x.scope" (v2) or "4:memory:/docker/abc" (v1).
			parts := strings.SplitN(strings.TrimSpace(line), ":", 3)
			if len(parts) != 3 {
				continue
			}
			switch {
			case parts[0] == "0" && parts[1] == "":
				v2Dirs = append(v2Dirs, ancestors(parts[2])...)
			case hasController(parts[1], "memory"):
				v1Dirs = append(v1Dirs, ancestors(parts[2])...)
			}
		}
	}
	return v2Dirs, v1Dirs
}

// ancestors returns p and each of its parents, without the root.
func ancestors(p string) []string {
	var out []string
	for p = path.Clean("/" + p); p != "/"; p = path.Dir(p) {
		out = append(out, p)
	}
	return out
}

// hasController reports whether the comma-separated list has name.
func hasController(list, name string) bool {
	for c := range strings.SplitSeq(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// ErrSyntax is returned by ParseSize for text that is not a size: empty,
// negative, fractional, or with an unknown unit.
var ErrSyntax = errors.New("memsize: invalid size")

// ErrSizeOverflow is returned by ParseSize for a size that does not fit in 64
// bits.
var ErrSizeOverflow = errors.New("memsize: size overflows 64 bits")

// ErrSizeTooLarge is returned by CheckSize for an arena larger than the memory
// the daemon may use (physical memory or its cgroup limit).
var ErrSizeTooLarge = errors.New("memsize: size exceeds the memory limit")

// ErrNotEnoughMemory is returned by CheckSize when the memory to reserve up
// front is not available now.
var ErrNotEnoughMemory = errors.New("memsize: not enough memory to reserve")

// Memory holds the figures an arena size is checked against; a field whose OK
// flag is false could not be read.
type Memory struct {
	Total        uint64 // MemTotal of /proc/meminfo
	TotalOK      bool
	Available    uint64 // MemAvailable of /proc/meminfo
	AvailableOK  bool
	Cgroup       uint64 // smallest memory limit of this process's cgroups
	CgroupOK     bool
	CgroupFree   uint64 // smallest (limit - usage) among those cgroups
	CgroupFreeOK bool
}

// ReadMemory reads the machine's and this process's cgroup memory figures.
func ReadMemory() Memory { return readMemory(os.DirFS("/")) }

func readMemory(root fs.FS) Memory {
	var m Memory
	m.Total, m.TotalOK = memTotal(root)
	m.Available, m.AvailableOK = meminfoField(root, "MemAvailable:")
	m.Cgroup, m.CgroupOK = cgroupLimit(root)
	m.CgroupFree, m.CgroupFreeOK = cgroupFree(root)
	return m
}

// Limit returns the memory the daemon may use at most: the smaller of
// physical memory and the cgroup limit, with a description of where it comes
// from.
func (m Memory) Limit() (uint64, string, bool) {
	switch {
	case m.CgroupOK && (!m.TotalOK || m.Cgroup < m.Total):
		return m.Cgroup, "the cgroup memory limit", true
	case m.TotalOK:
		return m.Total, "physical memory (MemTotal)", true
	}
	return 0, "", false
}

// Free returns the memory available now: the smaller of MemAvailable and
// what this process's cgroups have left, with where it comes from.
func (m Memory) Free() (uint64, string, bool) {
	switch {
	case m.CgroupFreeOK && (!m.AvailableOK || m.CgroupFree < m.Available):
		return m.CgroupFree, "left under the cgroup memory limit", true
	case m.AvailableOK:
		return m.Available, "available (MemAvailable)", true
	}
	return 0, "", false
}

// CheckSize checks an arena size against m before the daemon starts. A size
// over the memory limit fails with ErrSizeTooLarge unless allowOvercommit:
// writers would be OOM-killed before the store reports NotEnoughMemory. With
// reserve (the whole arena pre-faulted at start), a size over the memory
// free now fails with ErrNotEnoughMemory, whatever allowOvercommit says: the
// kernel would kill the daemon while it starts. Figures that cannot be read
// are not checked.
func CheckSize(size uint64, reserve, allowOvercommit bool, m Memory) error {
	if limit, what, ok := m.Limit(); ok && size > limit && !allowOvercommit {
		return fmt.Errorf("%w: --size %s is larger than %s, %s; writers would be OOM-killed "+
			"instead of getting NotEnoughMemory: give a smaller --size (the default is half of it) "+
			"or pass --allow-overcommit", ErrSizeTooLarge, HumanSize(size), what, HumanSize(limit))
	}
	if !reserve {
		return nil
	}
	if free, what, ok := m.Free(); ok && size > free {
		return fmt.Errorf("%w: --reserve-memory needs %s now but only %s is %s: "+
			"give a smaller --size or drop --reserve-memory", ErrNotEnoughMemory, HumanSize(size), HumanSize(free), what)
	}
	return nil
}

// HumanSize formats n for people: "4 GiB", "1.5 GiB", "300 MiB", "12 B",
// followed by the exact byte count when rounded: "1.5 GiB (1610612737 bytes)".
func HumanSize(n uint64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}
	i, div := 0, uint64(1)
	for i < len(units)-1 && n/div >= 1024 {
		i, div = i+1, div*1024
	}
	if i == 0 {
		return fmt.Sprintf("%d B", n)
	}
	v := float64(n) / float64(div)
	s := strconv.FormatFloat(v, 'f', 1, 64)
	s = strings.TrimSuffix(s, ".0")
	if n%div*10%div == 0 { // exact in tenths of the unit
		return s + " " + units[i]
	}
	return fmt.Sprintf("%s %s (%d bytes)", s, units[i], n)
}

// meminfoField reads one "Name: N kB" field of /proc/meminfo, in bytes.
func meminfoField(root fs.FS, name string) (uint64, bool) {
	data, err := fs.ReadFile(root, "proc/meminfo")
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) != 3 || fields[0] != name || fields[2] != "kB" {
			continue
		}
		kb, err := strconv.ParseUint(fields[1], 10, 64)
		if err != nil || kb > (1<<64-1)/kib {
			return 0, false
		}
		return kb * kib, true
	}
	return 0, false
}

// cgroupFree returns the smallest room left (limit - usage) among the cgroups
// of this process that have a memory limit.
func cgroupFree(root fs.FS) (uint64, bool) {
	v2Dirs, v1Dirs := cgroupDirs(root)
	var free uint64
	found := false
	consider := func(limitFile, usageFile string) {
		limit, ok1 := readUint(root, limitFile)
		usage, ok2 := readUint(root, usageFile)
		if !ok1 || !ok2 {
			return
		}
		left := uint64(0)
		if limit > usage {
			left = limit - usage
		}
		if !found || left < free {
			free, found = left, true
		}
	}
	for _, dir := range v2Dirs {
		consider(path.Join("sys/fs/cgroup", dir, "memory.max"), path.Join("sys/fs/cgroup", dir, "memory.current"))
	}
	for _, dir := range v1Dirs {
		d := path.Join("sys/fs/cgroup/memory", dir)
		consider(path.Join(d, "memory.limit_in_bytes"), path.Join(d, "memory.usage_in_bytes"))
	}
	return free, found
}

// readUint reads a file holding one decimal number ("max" does not parse).
func readUint(root fs.FS, file string) (uint64, bool) {
	data, err := fs.ReadFile(root, file)
	if err != nil {
		return 0, false
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(data)), 10, 64)
	return v, err == nil
}
