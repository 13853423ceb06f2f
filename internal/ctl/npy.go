package ctl

import (
	"encoding/binary"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// NumPy's .npy format (numpy.lib.format, versions 1.0 to 3.0): the magic
// "\x93NUMPY", two version bytes, the header's length (2 bytes little-endian
// in 1.0, 4 in 2.0 and 3.0), then the header, a Python dict literal
// {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with
// spaces and a newline so that the data starts 64-byte aligned; the data
// follow, C order unless fortran_order.

const npyMagic = "\x93NUMPY"

// npyHeader is a parsed .npy header.
type npyHeader struct {
	descr   string // NumPy's dtype.str: "<f4", "|b1", ...
	fortran bool
	shape   []uint64
}

// dtype is an element type both .npy and vineyard::Tensor name.
type dtype struct {
	str      string // dtype.str, with a byte order of '<', '>' or '|'
	name     string // dtype.name: float32, int64, bool, ...
	itemsize int
}

// cppTypes are upstream's typename parameters where they differ from NumPy's
// dtype name (vineyard::Tensor<double>, not <float64>); python/vineyard/data/tensor.py has the same table.
var cppTypes = map[string]string{"int32": "int", "uint32": "uint32", "int64": "int64", "uint64": "uint64",
	"float32": "float", "float64": "double"}

func (d dtype) tensorTypename() string {
	if t, ok := cppTypes[d.name]; ok {
		return "vineyard::Tensor<" + t + ">"
	}
	return "vineyard::Tensor<" + d.name + ">"
}

// parseDtype reads a NumPy dtype string of a fixed-size number or bool.
func parseDtype(s string) (dtype, error) {
	if len(s) < 3 {
		return dtype{}, unsupportedf("dtype %q is not a plain number type", s)
	}
	order, kind := s[0], s[1]
	size, err := strconv.Atoi(s[2:])
	if err != nil || size <= 0 {
		return dtype{}, unsupportedf("dtype %q is not a plain number type", s)
	}
	if order == '=' {
		order = '<' // the only byte order of the machines we run on
	}
	if order != '<' && order != '>' && order != '|' {
		return dtype{}, unsupportedf("dtype %q: unknown byte order", s)
	}
	var name string
	switch {
	case kind == 'b' && size == 1:
		name = "bool"
	case kind == 'i' && (size == 1 || size == 2 || size == 4 || size == 8):
		name = "int" + strconv.Itoa(size*8)
	case kind == 'u' && (size == 1 || size == 2 || size == 4 || size == 8):
		name = "uint" + strconv.Itoa(size*8)
	case kind == 'f' && (size == 2 || size == 4 || size == 8 || size == 16):
		name = "float" + strconv.Itoa(size*8)
	case kind == 'c' && (size == 8 || size == 16 || size == 32):
		name = "complex" + strconv.Itoa(size*8)
	default:
		return dtype{}, unsupportedf("dtype %q: only bool, integer, float and complex elements are supported "+
			"(no objects, strings, dates or structured types)", s)
	}
	if size == 1 {
		order = '|'
	} else if order == '|' {
		return dtype{}, unsupportedf("dtype %q: a multi-byte type needs a byte order", s)
	}
	return dtype{str: string(order) + string(kind) + strconv.Itoa(size), name: name, itemsize: size}, nil
}

var (
	npyDescr   = regexp.MustCompile(`'descr'\s*:\s*'([^']*)'`)
	npyFortran = regexp.MustCompile(`'fortran_order'\s*:\s*(True|False)`)
	npyShape   = regexp.MustCompile(`'shape'\s*:\s*\(([^)]*)\)`)
)

// readNpyHeader reads the magic, version and header of a .npy stream,
// leaving r at the first byte of the data.
func readNpyHeader(r io.Reader) (npyHeader, error) {
	var pre [8]byte
	if _, err := io.ReadFull(r, pre[:]); err != nil || string(pre[:6]) != npyMagic {
		return npyHeader{}, unsupportedf("not a .npy file (no \\x93NUMPY magic)")
	}
	var n uint32
	switch pre[6] {
	case 1:
		var b [2]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return npyHeader{}, unsupportedf(".npy header: %v", err)
		}
		n = uint32(binary.LittleEndian.Uint16(b[:]))
	case 2, 3:
		var b [4]byte
		if _, err := io.ReadFull(r, b[:]); err != nil {
			return npyHeader{}, unsupportedf(".npy header: %v", err)
		}
		n = binary.LittleEndian.Uint32(b[:])
	default:
		return npyHeader{}, unsupportedf(".npy format version %d.%d is not known", pre[6], pre[7])
	}
	if n > 1<<20 {
		return npyHeader{}, unsupportedf(".npy header of %d bytes", n)
	}
	text := make([]byte, n)
	if _, err := io.ReadFull(r, text); err != nil {
		return npyHeader{}, unsupportedf(".npy header: %v", err)
	}
	h := string(text)
	d, f, s := npyDescr.FindStringSubmatch(h), npyFortran.FindStringSubmatch(h), npyShape.FindStringSubmatch(h)
	if d == nil || f == nil || s == nil {
		return npyHeader{}, unsupportedf(".npy header %q: descr, fortran_order or shape missing "+
			"(structured dtypes are not supported)", strings.TrimSpace(h))
	}
	out := npyHeader{descr: d[1], fortran: f[1] == "True"}
	for _, dim := range strings.Split(s[1], ",") {
		dim = strings.TrimSpace(dim)
		if dim == "" {
			continue
		}
		v, err := strconv.ParseUint(strings.TrimSuffix(dim, "L"), 10, 64)
		if err != nil {
			return npyHeader{}, unsupportedf(".npy shape (%s): %v", s[1], err)
		}
		out.shape = append(out.shape, v)
	}
	return out, nil
}

// writeNpyHeader writes a version 1.0 header (2.0 when it does not fit).
func writeNpyHeader(w io.Writer, descr string, fortran bool, shape []uint64) error {
	dims := make([]string, len(shape))
	for i, d := range shape {
		dims[i] = strconv.FormatUint(d, 10)
	}
	tuple := strings.Join(dims, ", ")
	if len(shape) == 1 {
		tuple += ","
	}
	py := "False"
	if fortran {
		py = "True"
	}
	dict := fmt.Sprintf("{'descr': '%s', 'fortran_order': %s, 'shape': (%s), }", descr, py, tuple)
	pre := 10
	version := byte(1)
	if len(dict)+1+pre > 0xffff {
		pre, version = 12, 2
	}
	pad := 64 - (pre+len(dict)+1)%64
	if pad == 64 {
		pad = 0
	}
	header := dict + strings.Repeat(" ", pad) + "\n"
	b := make([]byte, 0, pre+len(header))
	b = append(b, npyMagic...)
	b = append(b, version, 0)
	if version == 1 {
		b = binary.LittleEndian.AppendUint16(b, uint16(len(header)))
	} else {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(header)))
	}
	b = append(b, header...)
	_, err := w.Write(b)
	return err
}

// count returns the number of elements of shape, or false on overflow.
func count(shape []uint64) (uint64, bool) {
	n := uint64(1)
	for _, d := range shape {
		if d != 0 && n > ^uint64(0)/d {
			return 0, false
		}
		n *= d
	}
	return n, true
}

// fortranToC rewrites src, the elements of an array of shape in Fortran
// order, into dst in C order.
func fortranToC(dst, src []byte, shape []uint64, itemsize int) {
	nd := len(shape)
	fstride := make([]uint64, nd) // Fortran strides in elements
	s := uint64(1)
	for k := range nd {
		fstride[k] = s
		s *= shape[k]
	}
	idx := make([]uint64, nd)
	total, _ := count(shape)
	for i := range total {
		var off uint64
		for k := range nd {
			off += idx[k] * fstride[k]
		}
		copy(dst[i*uint64(itemsize):], src[off*uint64(itemsize):(off+1)*uint64(itemsize)])
		for k := nd - 1; k >= 0; k-- { // next C-order index: the last axis moves fastest
			idx[k]++
			if idx[k] < shape[k] {
				break
			}
			idx[k] = 0
		}
	}
}
