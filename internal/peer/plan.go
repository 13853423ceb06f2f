package peer

import "fmt"

// piece is a resolved byte range [off, end) of the blob at position blob of a
// request, served or expected in this order on one stream.
type piece struct {
	blob     int
	off, end uint64
}

// resolve turns the ranges of a request into pieces, given the size of the
// blob of each range. A Length of 0 means "to the end of the blob".
func resolve(rs []Range, sizes []uint64) ([]piece, error) {
	ps := make([]piece, 0, len(rs))
	for i, r := range rs {
		size := sizes[i]
		if r.Offset > size {
			return nil, fmt.Errorf("%w: range offset %d past the end of %v (%d bytes)", ErrBadRequest, r.Offset, r.Blob, size)
		}
		end := size
		if r.Length != 0 {
			if r.Length > size-r.Offset {
				return nil, fmt.Errorf("%w: range [%d, +%d) past the end of %v (%d bytes)", ErrBadRequest, r.Offset, r.Length, r.Blob, size)
			}
			end = r.Offset + r.Length
		}
		ps = append(ps, piece{blob: i, off: r.Offset, end: end})
	}
	return ps, nil
}

// split cuts pieces into at most streams runs of about equal bytes, cut at
// multiples of align within a blob; each run is the ranges of one stream.
// Runs keep request order, so stream 0 carries the start of the first blob.
func split(ps []piece, blobs []Range, streams int, align uint64) [][]Range {
	var total uint64
	for _, p := range ps {
		total += p.end - p.off
	}
	per := (total + uint64(streams) - 1) / uint64(streams)
	per = (per + align - 1) / align * align
	plan := make([][]Range, 1, streams)
	var room = per
	for _, p := range ps {
		for off := p.off; off < p.end; {
			if room == 0 {
				plan = append(plan, nil)
				room = per
			}
			n := min(p.end-off, room)
			cur := &plan[len(plan)-1]
			*cur = append(*cur, Range{Blob: blobs[p.blob].Blob, Offset: off, Length: n})
			off += n
			room -= n
		}
	}
	return plan
}
