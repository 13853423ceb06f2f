package ids

import (
	"sync"
	"testing"
)

func TestStringParse(t *testing.T) {
	for _, tc := range []struct {
		id   ObjectID
		text string
	}{
		{0, "o0000000000000000"},
		{EmptyBlob, "o8000000000000000"},
		{0x1234abcd, "o000000001234abcd"},
		{Invalid, "offffffffffffffff"},
	} {
		t.Run(tc.text, func(t *testing.T) {
			if got := tc.id.String(); got != tc.text {
				t.Fatalf("String() = %q, want %q", got, tc.text)
			}
			back, err := Parse(tc.text)
			if err != nil || back != tc.id {
				t.Fatalf("Parse(%q) = %v, %v", tc.text, back, err)
			}
		})
	}
	if v, err := Parse("12345"); err != nil || v != 12345 {
		t.Fatalf("decimal parse = %v, %v", v, err)
	}
	for _, bad := range []string{"", "o", "ozz", "o12345678901234567", "o-1"} {
		if _, err := Parse(bad); err == nil {
			t.Errorf("Parse(%q) accepted", bad)
		}
	}
}

func TestBlobBit(t *testing.T) {
	g := NewGenerator(3)
	if g.Object().IsBlob() || !g.Blob().IsBlob() || Invalid.IsBlob() {
		t.Fatal("blob bit wrong")
	}
}

func TestGeneratorUnique(t *testing.T) {
	g := NewGenerator(1)
	var mu sync.Mutex
	seen := map[ObjectID]bool{}
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]ObjectID, 0, 20000)
			for i := 0; i < 20000; i++ {
				local = append(local, g.Object())
			}
			mu.Lock()
			defer mu.Unlock()
			for _, id := range local {
				if seen[id] {
					t.Errorf("duplicate id %v", id)
					return
				}
				seen[id] = true
			}
		}()
	}
	wg.Wait()
}

func FuzzParse(f *testing.F) {
	f.Add("o8000000000000000")
	f.Add("123")
	f.Fuzz(func(t *testing.T, s string) {
		id, err := Parse(s)
		if err != nil {
			return
		}
		if back, err := Parse(id.String()); err != nil || back != id {
			t.Fatalf("roundtrip of %q: %v %v", s, back, err)
		}
	})
}

func TestBlobBlock(t *testing.T) {
	g := NewGenerator(5)
	seen := map[ObjectID]bool{}
	for round := 0; round < 50; round++ {
		first := g.BlobBlock(1000)
		for i := uint64(0); i < 1000; i++ {
			id := first + ObjectID(i)
			if !id.IsBlob() || (uint64(id)>>12)&0x3ff != 5 || seen[id] {
				t.Fatalf("block id %v: blob %v, instance %d, repeated %v", id, id.IsBlob(), (uint64(id)>>12)&0x3ff, seen[id])
			}
			seen[id] = true
		}
		if b := g.Blob(); seen[b] {
			t.Fatalf("Blob %v repeats a block id", b)
		} else {
			seen[b] = true
		}
	}
}
