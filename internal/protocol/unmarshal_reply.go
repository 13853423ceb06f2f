package protocol

import (
	"encoding/json"
	"strconv"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/jsonscan"
	"github.com/v6d-io/v6d-go/internal/status"
)

// UnmarshalReply decodes a reply body into reply, as json.Unmarshal does. The
// replies of every put (acknowledgements, exists, create_data) are read in
// place by hand: encoding/json costs the client 1.5-2.5 µs per reply
// (reflection, a validating pre-scan), a tenth of a put's CPU. Anything the
// hand decoder does not expect (another reply type, a float where an id
// goes, escapes in a key) goes to json.Unmarshal, so the result never
// differs (TestDecodeReplyMatchesEncodingJSON, FuzzDecodeReply).
func UnmarshalReply(body []byte, reply Reply) error {
	if fastDecodeReply(body, reply) {
		return nil
	}
	return json.Unmarshal(body, reply)
}

// fastDecodeReply decodes the replies it knows; false: it did not (reply
// may be half filled: the caller decodes again into it from scratch).
func fastDecodeReply(body []byte, reply Reply) bool {
	switch r := reply.(type) {
	case *AckReply:
		*r = AckReply{}
		return decodeFields(body, &r.Header, func(*jsonscan.Scanner, []byte) (bool, bool) { return false, true })
	case *ExistsReply:
		*r = ExistsReply{}
		return decodeFields(body, &r.Header, func(s *jsonscan.Scanner, k []byte) (bool, bool) {
			if string(k) != "exists" {
				return false, true
			}
			v, ok := scanBool(s)
			r.Exists = v
			return true, ok
		})
	case *CreateDataReply:
		*r = CreateDataReply{}
		return decodeFields(body, &r.Header, func(s *jsonscan.Scanner, k []byte) (bool, bool) {
			var ok bool
			switch string(k) {
			case "id":
				r.ID, ok = scanID(s)
			case "signature":
				r.Signature, ok = scanUint(s)
			case "instance_id":
				r.InstanceID, ok = scanUint(s)
			case "content":
				start := s.Pos
				if s.Peek() == 'n' { // null, kept as encoding/json keeps it
					r.Content = json.RawMessage("null")
					return true, scanNull(s)
				}
				if s.Skip(1) != nil {
					return true, false
				}
				r.Content = append(json.RawMessage(nil), trimWS(s.Buf[start:s.Pos])...)
				ok = json.Valid(r.Content)
			case "inline_ids":
				r.InlineIDs, ok = scanIDs(s)
			case "lease":
				if s.Peek() == 'n' {
					return true, scanNull(s)
				}
				r.Lease = &LeaseGrant{}
				ok = scanLease(s, r.Lease)
			default:
				return false, true
			}
			return true, ok
		})
	}
	return false
}

// decodeFields walks the object body: the header's keys go to h, the others
// to field, which returns whether it took the key (else its value is
// skipped) and whether all is well. It returns false at anything
// unexpected.
func decodeFields(body []byte, h *Header, field func(s *jsonscan.Scanner, key []byte) (took, ok bool)) bool {
	s := &jsonscan.Scanner{Buf: body}
	if s.Expect('{') != nil {
		return false
	}
	if s.Peek() == '}' {
		s.Pos++
		return atEnd(s)
	}
	for {
		raw, escaped, err := s.RawString()
		if err != nil || escaped {
			return false
		}
		key := raw[1 : len(raw)-1]
		if s.Expect(':') != nil {
			return false
		}
		switch string(key) {
		case "type", "message":
			raw, escaped, err := s.RawString()
			if err != nil || escaped {
				return false
			}
			if key[0] == 't' {
				h.Type = string(raw[1 : len(raw)-1])
			} else {
				h.Message = string(raw[1 : len(raw)-1])
			}
		case "code":
			v, ok := scanUint(s)
			if !ok || v > 1<<31 {
				return false
			}
			h.Code = status.Code(v)
		default:
			took, ok := field(s, key)
			if !ok {
				return false
			}
			if !took && !skipValid(s, key) {
				return false
			}
		}
		if more, ok := s.Next('}'); !ok || !more {
			return ok && atEnd(s)
		}
	}
}

// skipValid skips the value of a key the reply has no field for, when it
// is valid JSON and the key could not match a field in another case
// (encoding/json matches keys case-insensitively).
func skipValid(s *jsonscan.Scanner, key []byte) bool {
	for _, c := range key {
		if c >= 'A' && c <= 'Z' {
			return false
		}
	}
	s.WS()
	start := s.Pos
	return s.Skip(1) == nil && json.Valid(s.Buf[start:s.Pos])
}

func atEnd(s *jsonscan.Scanner) bool {
	s.WS()
	return s.Pos == len(s.Buf)
}

// scanUint reads a JSON number that is a uint64 written plainly.
func scanUint(s *jsonscan.Scanner) (uint64, bool) {
	s.WS()
	start := s.Pos
	for s.Pos < len(s.Buf) && s.Buf[s.Pos] >= '0' && s.Buf[s.Pos] <= '9' {
		s.Pos++
	}
	tok := s.Buf[start:s.Pos]
	if len(tok) == 0 || (len(tok) > 1 && tok[0] == '0') {
		return 0, false
	}
	if s.Pos < len(s.Buf) && strconvStop(s.Buf[s.Pos]) {
		return 0, false // a fraction or exponent: not ours to read
	}
	v, err := strconv.ParseUint(string(tok), 10, 64)
	return v, err == nil
}

func strconvStop(c byte) bool { return c == '.' || c == 'e' || c == 'E' || c == '-' || c == '+' }

func scanBool(s *jsonscan.Scanner) (bool, bool) {
	switch s.Peek() {
	case 't':
		return true, scanLiteral(s, "true")
	case 'f':
		return false, scanLiteral(s, "false")
	}
	return false, false
}

func scanNull(s *jsonscan.Scanner) bool { return scanLiteral(s, "null") }

func scanLiteral(s *jsonscan.Scanner, lit string) bool {
	s.WS()
	if len(s.Buf)-s.Pos < len(lit) || string(s.Buf[s.Pos:s.Pos+len(lit)]) != lit {
		return false
	}
	s.Pos += len(lit)
	return s.Pos == len(s.Buf) || !isLetter(s.Buf[s.Pos])
}

func isLetter(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// scanID reads an id written as a plain uint64 number.
func scanID(s *jsonscan.Scanner) (ids.ObjectID, bool) {
	v, ok := scanUint(s)
	return ids.ObjectID(v), ok
}

// scanIDs reads an array of plain uint64 numbers (or null).
func scanIDs(s *jsonscan.Scanner) ([]ids.ObjectID, bool) { return scanNumbers[ids.ObjectID](s) }

// scanNumbers reads an array of plain uint64 numbers (or null) as Ts.
func scanNumbers[T ~uint64](s *jsonscan.Scanner) ([]T, bool) {
	if s.Peek() == 'n' {
		return nil, scanNull(s)
	}
	if s.Expect('[') != nil {
		return nil, false
	}
	if s.Peek() == ']' {
		s.Pos++
		return []T{}, true
	}
	out := make([]T, 0, 4) // a put's lease_blobs: 3
	for {
		v, ok := scanUint(s)
		if !ok {
			return nil, false
		}
		out = append(out, T(v))
		if more, ok := s.Next(']'); !ok {
			return nil, false
		} else if !more {
			return out, true
		}
	}
}

// scanLease reads a LeaseGrant object; unknown keys are skipped.
func scanLease(s *jsonscan.Scanner, g *LeaseGrant) bool {
	if s.Expect('{') != nil {
		return false
	}
	if s.Peek() == '}' {
		s.Pos++
		return true
	}
	for {
		raw, escaped, err := s.RawString()
		if err != nil || escaped || s.Expect(':') != nil {
			return false
		}
		var ok bool
		var v uint64
		switch string(raw[1 : len(raw)-1]) {
		case "offset":
			g.Offset, ok = scanUint(s)
		case "size":
			g.Size, ok = scanUint(s)
		case "store_fd":
			v, ok = scanUint(s)
			ok = ok && v < 1<<31
			g.StoreFd = int(v)
		case "first_id":
			g.FirstID, ok = scanID(s)
		case "ids":
			g.IDs, ok = scanUint(s)
		default:
			ok = skipValid(s, raw[1:len(raw)-1])
		}
		if !ok {
			return false
		}
		if more, ok := s.Next('}'); !ok || !more {
			return ok
		}
	}
}

func trimWS(b []byte) []byte {
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\n' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
