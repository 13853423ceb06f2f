package memsize

import (
	"errors"
	"math"
	"strings"
	"testing"
	"testing/fstest"
)

func TestParseSize(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint64
		err  error
	}{
		{"1073741824", 1 << 30, nil},
		{"0", 0, nil},
		{"512Mi", 512 << 20, nil},
		{"4Gi", 4 << 30, nil},
		{"2G", 2e9, nil},
		{"1024M", 1024e6, nil},
		{"1k", 1000, nil},
		{"16Ki", 16 << 10, nil},
		{"2GB", 2e9, nil},
		{"2GiB", 2 << 30, nil},
		{"2gib", 2 << 30, nil},
		{"2gB", 2e9, nil},
		{"2KI", 2048, nil},
		{"1T", 1e12, nil},
		{"1Ti", 1 << 40, nil},
		{"1P", 1e15, nil},
		{"1Pi", 1 << 50, nil},
		{"1E", 1e18, nil},
		{"15Ei", 15 << 60, nil},
		{"100B", 100, nil},
		{"100b", 100, nil},
		{" 64 Mi ", 64 << 20, nil},
		{"007", 7, nil},
		{"18446744073709551615", math.MaxUint64, nil},

		{"", 0, ErrSyntax},
		{"   ", 0, ErrSyntax},
		{"-1", 0, ErrSyntax},
		{"-1Gi", 0, ErrSyntax},
		{"+1", 0, ErrSyntax},
		{"Gi", 0, ErrSyntax},
		{"abc", 0, ErrSyntax},
		{"1.5Gi", 0, ErrSyntax},
		{"1,000", 0, ErrSyntax},
		{"1_000", 0, ErrSyntax},
		{"1X", 0, ErrSyntax},
		{"1iB", 0, ErrSyntax},
		{"1Bi", 0, ErrSyntax},
		{"1KBB", 0, ErrSyntax},
		{"1Kib2", 0, ErrSyntax},
		{"1 2", 0, ErrSyntax},
		{"0x10", 0, ErrSyntax},
		{"1e9", 0, ErrSyntax},

		{"18446744073709551616", 0, ErrSizeOverflow},
		{"99999999999999999999999", 0, ErrSizeOverflow},
		{"16Ei", 0, ErrSizeOverflow},
		{"19E", 0, ErrSizeOverflow},
		{"18446744073709551615K", 0, ErrSizeOverflow},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ParseSize(tc.in)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("ParseSize(%q) = %d, %v; want %v", tc.in, got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("ParseSize(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
			}
		})
	}
}

func TestFormatSize(t *testing.T) {
	for _, tc := range []struct {
		in   uint64
		want string
	}{
		{0, "0"},
		{1, "1"},
		{1000, "1K"},
		{1024, "1Ki"},
		{1536, "1536"}, // 1.5Ki: no unit divides it
		{512 << 20, "512Mi"},
		{1 << 30, "1Gi"},
		{2e9, "2G"},
		{1536 << 20, "1536Mi"},
		{1500000, "1500K"},
		{1000001, "1000001"},
		{math.MaxUint64, "18446744073709551615"},
		{1 << 63, "8Ei"},
		{1e18, "1E"},
		// 1024e6: "1024M" beats "1000000Ki".
		{1024e6, "1024M"},
		// 1024000: "1000Ki" beats "1024K".
		{1024000, "1000Ki"},
	} {
		t.Run(tc.want, func(t *testing.T) {
			if got := FormatSize(tc.in); got != tc.want {
				t.Fatalf("FormatSize(%d) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}

// FuzzParseSize checks that ParseSize never panics and that FormatSize's
// output always parses back to the same number.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"1073741824", "512Mi", "2GB", "2GiB", "1k", "-1", "1.5G", "16Ei", " 3 ki b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			if !errors.Is(err, ErrSyntax) && !errors.Is(err, ErrSizeOverflow) {
				t.Fatalf("ParseSize(%q) error %v matches no sentinel", s, err)
			}
			return
		}
		text := FormatSize(n)
		if back, err := ParseSize(text); err != nil || back != n {
			t.Fatalf("ParseSize(FormatSize(%d) = %q) = %d, %v", n, text, back, err)
		}
	})
}

func TestDefaultSize(t *testing.T) {
	const meminfo = "MemTotal:        8388608 kB\nMemFree:         1000000 kB\n" // 8 GiB
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	for _, tc := range []struct {
		name  string
		files fstest.MapFS
		want  uint64
	}{
		{"nothing readable", fstest.MapFS{}, 1 << 30},
		{"meminfo only", fstest.MapFS{"proc/meminfo": file(meminfo)}, 4 << 30},
		{"garbled meminfo", fstest.MapFS{"proc/meminfo": file("MemTotal: lots\n")}, 1 << 30},
		{"v2 root unlimited", fstest.MapFS{
			"proc/meminfo":             file(meminfo),
			"sys/fs/cgroup/memory.max": file("max\n"),
		}, 4 << 30},
		{"v2 root limit", fstest.MapFS{
			"proc/meminfo":             file(meminfo),
			"sys/fs/cgroup/memory.max": file("2147483648\n"),
		}, 1 << 30},
		{"v2 ancestor limit", fstest.MapFS{
			"proc/meminfo":                         file(meminfo),
			"proc/self/cgroup":                     file("0::/a/b/c\n"),
			"sys/fs/cgroup/a/b/c/memory.max":       file("max\n"),
			"sys/fs/cgroup/a/memory.max":           file("1073741824\n"),
			"sys/fs/cgroup/a/b/memory.max":         file("3221225472\n"),
			"sys/fs/cgroup/unrelated/x/memory.max": file("1048576\n"),
		}, 512 << 20},
		{"v1 unlimited", fstest.MapFS{
			"proc/meminfo":     file(meminfo),
			"proc/self/cgroup": file("4:memory:/docker/abc\n0::/\n"),
			"sys/fs/cgroup/memory/memory.limit_in_bytes": file("9223372036854771712\n"),
		}, 4 << 30},
		{"v1 own cgroup", fstest.MapFS{
			"proc/meminfo":     file(meminfo),
			"proc/self/cgroup": file("9:cpu,memory:/docker/abc\n"),
			"sys/fs/cgroup/memory/memory.limit_in_bytes":            file("9223372036854771712\n"),
			"sys/fs/cgroup/memory/docker/abc/memory.limit_in_bytes": file("1000000000\n"),
		}, 476 << 20}, // 500,000,000 rounded down to a MiB
		{"cgroup only", fstest.MapFS{"sys/fs/cgroup/memory.max": file("4294967296")}, 2 << 30},
		{"tiny limit", fstest.MapFS{"sys/fs/cgroup/memory.max": file("4096")}, 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := defaultSize(tc.files); got != tc.want {
				t.Fatalf("defaultSize = %d (%s), want %d (%s)", got, FormatSize(got), tc.want, FormatSize(tc.want))
			}
		})
	}
}

func TestDefaultSizeOnThisMachine(t *testing.T) {
	got := DefaultSize()
	if got < 1<<20 || got%(1<<20) != 0 {
		t.Fatalf("DefaultSize() = %d, want a positive multiple of 1 MiB", got)
	}
	t.Logf("DefaultSize() = %s", FormatSize(got))
}

func TestCheckSize(t *testing.T) {
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	machine := fstest.MapFS{ // 8 GiB, 2 GiB available, cgroup a: 4 GiB limit, 3 GiB used
		"proc/meminfo":                   file("MemTotal:        8388608 kB\nMemAvailable:    2097152 kB\n"),
		"proc/self/cgroup":               file("0::/a\n"),
		"sys/fs/cgroup/a/memory.max":     file("4294967296\n"),
		"sys/fs/cgroup/a/memory.current": file("3221225472\n"),
	}
	m := readMemory(machine)
	if !m.TotalOK || m.Total != 8<<30 || m.Available != 2<<30 || m.Cgroup != 4<<30 || m.CgroupFree != 1<<30 {
		t.Fatalf("readMemory = %+v", m)
	}
	for _, tc := range []struct {
		name           string
		size           uint64
		reserve, allow bool
		err            error
		says           []string
	}{
		{"within", 2 << 30, false, false, nil, nil},
		{"at the limit", 4 << 30, false, false, nil, nil},
		{"over the cgroup limit", 5 << 30, false, false, ErrSizeTooLarge,
			[]string{"--size 5 GiB", "cgroup memory limit, 4 GiB", "--allow-overcommit"}},
		{"over, allowed", 5 << 30, false, true, nil, nil},
		{"reserve within", 512 << 20, true, false, nil, nil},
		{"reserve over free", 2 << 30, true, false, ErrNotEnoughMemory,
			[]string{"--reserve-memory needs 2 GiB", "only 1 GiB is left under the cgroup"}},
		{"reserve over free, allowed", 2 << 30, true, true, ErrNotEnoughMemory, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckSize(tc.size, tc.reserve, tc.allow, m)
			if !errors.Is(err, tc.err) || (tc.err == nil) != (err == nil) {
				t.Fatalf("CheckSize = %v, want %v", err, tc.err)
			}
			for _, s := range tc.says {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not say %q", err, s)
				}
			}
		})
	}
	// Nothing readable: nothing is checked.
	if err := CheckSize(1<<62, true, false, readMemory(fstest.MapFS{})); err != nil {
		t.Fatalf("CheckSize with no figures = %v", err)
	}
	// No cgroup: MemTotal and MemAvailable decide.
	m = readMemory(fstest.MapFS{"proc/meminfo": machine["proc/meminfo"]})
	if err := CheckSize(9<<30, false, false, m); !errors.Is(err, ErrSizeTooLarge) ||
		!strings.Contains(err.Error(), "physical memory (MemTotal), 8 GiB") {
		t.Fatalf("CheckSize over MemTotal = %v", err)
	}
	if err := CheckSize(3<<30, true, false, m); !errors.Is(err, ErrNotEnoughMemory) ||
		!strings.Contains(err.Error(), "MemAvailable") {
		t.Fatalf("CheckSize reserve over MemAvailable = %v", err)
	}
}

func TestHumanSize(t *testing.T) {
	for in, want := range map[uint64]string{
		0: "0 B", 1023: "1023 B", 1024: "1 KiB", 4 << 30: "4 GiB", 3 << 29: "1.5 GiB",
		1<<30 + 1: "1 GiB (1073741825 bytes)", 1 << 62: "4 EiB",
	} {
		if got := HumanSize(in); got != want {
			t.Errorf("HumanSize(%d) = %q, want %q", in, got, want)
		}
	}
}
