package ctl

import (
	"bytes"
	"flag"
	"slices"
	"testing"
)

// FuzzReadNpyHeader: any bytes give a header or an error, never a panic;
// a header read back from what writeNpyHeader wrote is the same.
func FuzzReadNpyHeader(f *testing.F) {
	var b bytes.Buffer
	_ = writeNpyHeader(&b, "<f8", true, []uint64{3, 4})
	f.Add(b.Bytes())
	f.Add([]byte("\x93NUMPY\x01\x00\x10\x00{'descr': '<i2'}"))
	f.Add([]byte("\x93NUMPY\x02\x00\xff\xff\xff\xff"))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := readNpyHeader(bytes.NewReader(data))
		if err != nil {
			return
		}
		var out bytes.Buffer
		if err := writeNpyHeader(&out, h.descr, h.fortran, h.shape); err != nil {
			t.Fatal(err)
		}
		if out.Len()%64 != 0 {
			t.Fatalf("header of %d bytes: the data would not start 64-byte aligned", out.Len())
		}
		h2, err := readNpyHeader(&out)
		if err != nil || h2.descr != h.descr || h2.fortran != h.fortran || !slices.Equal(h2.shape, h.shape) {
			t.Fatalf("%+v written and read back as %+v (%v)", h, h2, err)
		}
		_, _ = parseDtype(h.descr)
	})
}

func TestParseDtype(t *testing.T) {
	for _, tc := range []struct {
		in, str, name, typename string
		ok                      bool
	}{
		{"<f4", "<f4", "float32", "vineyard::Tensor<float>", true},
		{"<f8", "<f8", "float64", "vineyard::Tensor<double>", true},
		{"<i8", "<i8", "int64", "vineyard::Tensor<int64>", true},
		{"<i4", "<i4", "int32", "vineyard::Tensor<int>", true},
		{"|b1", "|b1", "bool", "vineyard::Tensor<bool>", true},
		{"|u1", "|u1", "uint8", "vineyard::Tensor<uint8>", true},
		{"<u1", "|u1", "uint8", "vineyard::Tensor<uint8>", true},
		{"=u2", "<u2", "uint16", "vineyard::Tensor<uint16>", true},
		{">c16", ">c16", "complex128", "vineyard::Tensor<complex128>", true},
		{"|O", "", "", "", false},
		{"<U5", "", "", "", false},
		{"<M8[ns]", "", "", "", false},
		{"|i4", "", "", "", false},
		{"<i3", "", "", "", false},
	} {
		d, err := parseDtype(tc.in)
		if (err == nil) != tc.ok || (tc.ok && (d.str != tc.str || d.name != tc.name || d.tensorTypename() != tc.typename)) {
			t.Errorf("parseDtype(%q) = %+v, %v", tc.in, d, err)
		}
	}
}

func TestParseInterleaved(t *testing.T) {
	for _, tc := range []struct {
		args []string
		pos  []string
		out  string
	}{
		{[]string{"ID", "-o", "f"}, []string{"ID"}, "f"},
		{[]string{"-o", "f", "ID"}, []string{"ID"}, "f"},
		{[]string{"a", "-o", "f", "b"}, []string{"a", "b"}, "f"},
		{[]string{"a", "--", "-o", "x"}, []string{"a", "-o", "x"}, ""},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		out := fs.String("o", "", "")
		pos, err := parseInterleaved(fs, tc.args)
		if err != nil || !slices.Equal(pos, tc.pos) || *out != tc.out {
			t.Errorf("%v: positional %v, -o %q, %v", tc.args, pos, *out, err)
		}
	}
}
