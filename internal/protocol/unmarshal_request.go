package protocol

import (
	"encoding/json"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/jsonscan"
)

// fastDecodeRequest decodes, in place and by hand, the requests of a put
// that encoding/json decoded for 3-4 µs of the daemon's time each
// (create_data, and the release and exists that ride with puts); false: it
// did not (anything unexpected), and req must be decoded again from
// scratch. What it decodes equals what json.Unmarshal gives
// (TestDecodeRequestFastMatchesEncodingJSON, FuzzDecodeRequestFast).
func fastDecodeRequest(body []byte, req Request) bool {
	var h Header // the "type" has been read already; checked again here
	switch r := req.(type) {
	case *CreateDataRequest:
		return decodeFields(body, &h, func(s *jsonscan.Scanner, k []byte) (bool, bool) {
			var ok bool
			switch string(k) {
			case "content":
				s.WS()
				n, valid := jsonscan.ValidPrefix(s.Buf[s.Pos:]) // one pass: its end and its validity
				if !valid {
					return true, false
				}
				r.Content = append(json.RawMessage(nil), s.Buf[s.Pos:s.Pos+n]...)
				s.Pos += n
				ok = true
			case "seal":
				r.Seal, ok = scanIDs(s)
			case "inline":
				r.Inline, ok = scanUints(s)
			case "lease_blobs":
				r.LeaseBlobs, ok = scanUints(s)
			case "lease_size":
				r.LeaseSize, ok = scanUint(s)
			case "with_content":
				r.WithContent, ok = scanBool(s)
			case "id":
				r.ID, ok = scanID(s)
			case "pipelined":
				r.Pipelined, ok = scanBool(s)
			default:
				return false, true
			}
			return true, ok
		})
	case *ReleaseRequest:
		return decodeFields(body, &h, func(s *jsonscan.Scanner, k []byte) (bool, bool) {
			var ok bool
			switch string(k) {
			case "object_id":
				r.ObjectID, ok = scanID(s)
			case "ids":
				r.IDs, ok = scanIDs(s)
			default:
				return false, true
			}
			return true, ok
		})
	case *DelDataRequest:
		return decodeFields(body, &h, func(s *jsonscan.Scanner, k []byte) (bool, bool) {
			var ok bool
			switch string(k) {
			case "id":
				switch s.WS(); s.Peek() {
				case '[':
					var l []ids.ObjectID
					l, ok = scanIDs(s)
					r.ID = l
				case 'n': // IDList reads null as [0]: left to encoding/json
				default:
					var id ids.ObjectID
					id, ok = scanID(s)
					r.ID = IDList{id}
				}
			case "force":
				r.Force, ok = scanBool(s)
			case "deep":
				r.Deep, ok = scanBool(s)
			case "memory_trim":
				r.MemoryTrim, ok = scanBool(s)
			case "fastpath":
				r.Fastpath, ok = scanBool(s)
			default:
				return false, true
			}
			return true, ok
		})
	case *ExistsRequest:
		return decodeFields(body, &h, func(s *jsonscan.Scanner, k []byte) (bool, bool) {
			if string(k) != "id" {
				return false, true
			}
			var ok bool
			r.ID, ok = scanID(s)
			return true, ok
		})
	}
	return false
}

// scanUints reads an array of plain uint64 numbers (or null).
func scanUints(s *jsonscan.Scanner) ([]uint64, bool) { return scanNumbers[uint64](s) }
