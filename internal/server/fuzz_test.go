package server

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/sys/unix"

	"github.com/v6d-io/v6d-go/internal/protocol"
)

// Flags of the first byte of a FuzzConnection script.
const (
	fuzzRegister  = 1 << iota // send a register request first
	fuzzPassFd                // attach an fd (SCM_RIGHTS) to the first write
	fuzzSecond                // a second connection sends the same bytes at once
	fuzzKeepWrite             // keep the write side open: the daemon closes on a half frame, the client after a quiet second
)

// fuzzFrames builds a script: flags, then the frames of bodies, then tail.
func fuzzFrames(flags byte, tail []byte, bodies ...string) []byte {
	b := []byte{flags}
	for _, body := range bodies {
		b = protocol.AppendFrame(b, []byte(body))
	}
	return append(b, tail...)
}

// FuzzConnection drives the connection loop with a byte stream: frames
// (registration gate, pipelined requests, inline bytes), garbage, lying
// length prefixes, trailing bytes, fds a client should not send. Every
// reply must be a whole frame of a JSON object (valid UTF-8), the daemon
// must close the connection once the client is done, and the store must be
// consistent once all connections are gone.
func FuzzConnection(f *testing.F) {
	for _, seed := range [][]byte{
		fuzzFrames(0, nil, `{"type":"exists_request","id":1}`, `{"type":"register_request"}`),
		fuzzFrames(fuzzRegister, nil, `{"type":"create_buffer_request","size":64}`,
			`{"type":"seal_request","object_id":0}`, `{"type":"exists_request","id":2}`),
		fuzzFrames(fuzzRegister|fuzzSecond, []byte("garbage"),
			`{"type":"create_data_request","content":{"typename":"vineyard::Blob"},"inline":[3]}`),
		fuzzFrames(fuzzRegister, []byte("abc"), `{"type":"create_data_request","content":{"typename":"x","a":{"inline":0}},"inline":[3],"with_content":true}`),
		fuzzFrames(fuzzRegister|fuzzPassFd, nil, `{"type":"get_buffers_request","ids":[1,2],"unsafe":true}`),
		fuzzFrames(fuzzRegister, nil, `{"type":"put_name_request","object_id":1,"name":"n"}`,
			`{"type":"list_data_request","pattern":"*","regex":false,"limit":5}`, `{"type":"exit_request"}`, `{"type":"exists_request","id":1}`),
		fuzzFrames(fuzzRegister, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}),
		fuzzFrames(fuzzRegister, []byte{200, 0, 0, 0, 0, 0, 0, 0, '{'}),
		fuzzFrames(fuzzRegister|fuzzKeepWrite, []byte{5, 0, 0}),
		fuzzFrames(fuzzRegister, nil, "\xff\xfe", `{"type":"`+"\xc3\x28"+`"}`, `[]`, `{"type":null}`),
		fuzzFrames(fuzzRegister, nil, `{"type":"create_buffers_request","num":2,"sizes":[8,8]}`, `{"type":"drop_buffer_request","id":0}`),
		fuzzFrames(fuzzRegister, nil, `{"type":"get_data_request","id":[1],"sync_remote":false,"wait":true}`),
	} {
		f.Add(seed)
	}
	dir, err := os.MkdirTemp("", "v6d-fuzz-")
	if err != nil {
		f.Fatal(err)
	}
	defer func() { _ = os.RemoveAll(dir) }()
	s, err := Start(Config{Socket: filepath.Join(dir, "s.sock"), Size: 4 << 20, MaxFrame: 1 << 16,
		MaxInflightBytes: 1 << 20, FrameTimeout: 300 * time.Millisecond, ParkAfter: 5 * time.Millisecond,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		f.Fatal(err)
	}
	defer func() { _ = s.Close() }()
	f.Fuzz(func(t *testing.T, script []byte) {
		if len(script) == 0 {
			return
		}
		flags, data := script[0], script[1:]
		if flags&fuzzRegister != 0 {
			data = append(protocol.AppendFrame(nil, []byte(`{"type":"register_request"}`)), data...)
		}
		n := 1
		if flags&fuzzSecond != 0 {
			n = 2
		}
		done := make(chan error, n)
		for i := 0; i < n; i++ {
			go func() { done <- fuzzSession(s, data, flags) }()
		}
		for i := 0; i < n; i++ {
			if err := <-done; err != nil {
				t.Fatal(err)
			}
		}
		for end := time.Now().Add(4 * time.Second); s.connections() > 0; time.Sleep(time.Millisecond) {
			if time.Now().After(end) {
				t.Fatal("connections not closed")
			}
		}
		if n := s.inflight.Load(); n != 0 {
			t.Fatalf("%d bytes still charged to the frame budget", n)
		}
		if err := s.Store().CheckInvariants(); err != nil {
			t.Fatal(err)
		}
	})
}

// fuzzSession sends data on a new connection and checks every reply until
// the daemon closes it.
func fuzzSession(s *Server, data []byte, flags byte) error {
	nc, err := net.Dial("unix", s.Socket())
	if err != nil {
		return err
	}
	c := nc.(*net.UnixConn)
	defer func() { _ = c.Close() }()
	// Go's fuzzer takes an input running 10 s for a hung worker.
	_ = c.SetDeadline(time.Now().Add(4 * time.Second))
	writeErr := make(chan error, 1)
	go func() {
		var err error
		if flags&fuzzPassFd != 0 && len(data) > 0 {
			_, _, err = c.WriteMsgUnix(data[:1], unix.UnixRights(int(os.Stdin.Fd())), nil)
			data = data[1:]
		}
		if err == nil {
			_, err = c.Write(data)
		}
		if flags&fuzzKeepWrite == 0 {
			_ = c.CloseWrite()
		}
		writeErr <- err
	}()
	var hdr [8]byte
	for {
		if flags&fuzzKeepWrite != 0 {
			// Whole frames and an open write side: the daemon waits, rightly.
			_ = c.SetReadDeadline(time.Now().Add(3 * s.cfg.FrameTimeout))
		}
		if _, err := readFull(c, hdr[:]); err != nil {
			if flags&fuzzKeepWrite != 0 && errors.Is(err, errHang) {
				break
			}
			if errors.Is(err, errPartial) || errors.Is(err, errHang) {
				return err
			}
			break // closed by the daemon (or reset)
		}
		size := binary.LittleEndian.Uint64(hdr[:])
		if size > 1<<24 {
			return errors.New("a reply frame of an absurd size")
		}
		body := make([]byte, size)
		if _, err := readFull(c, body); err != nil {
			return errors.New("a partial reply body: " + err.Error())
		}
		var m map[string]any
		if !utf8.Valid(body) || json.Unmarshal(body, &m) != nil {
			return errors.New("a reply that is not a UTF-8 JSON object: " + string(body))
		}
		if _, ok := m["type"]; !ok {
			if _, ok := m["code"]; !ok {
				return errors.New("a reply with neither type nor code: " + string(body))
			}
		}
	}
	var ne net.Error
	if err := <-writeErr; errors.As(err, &ne) && ne.Timeout() {
		return errors.New("the daemon stopped reading")
	}
	return nil
}

var (
	errPartial = errors.New("a partial reply frame")
	errHang    = errors.New("the daemon neither replied nor closed the connection")
)

// readFull is io.ReadFull that tells a clean end (no byte) from a partial
// read, and a timeout from the end. It reads byte by byte to drop the fd
// messages (one 'F' byte with SCM_RIGHTS) that follow replies, closing the
// fds.
func readFull(c *net.UnixConn, b []byte) (int, error) {
	oob := make([]byte, unix.CmsgSpace(4*4))
	got := 0
	for got < len(b) {
		n, oobn, _, _, err := c.ReadMsgUnix(b[got:got+1], oob)
		if oobn > 0 {
			if msgs, perr := unix.ParseSocketControlMessage(oob[:oobn]); perr == nil {
				for i := range msgs {
					fds, _ := unix.ParseUnixRights(&msgs[i])
					for _, fd := range fds {
						_ = unix.Close(fd)
					}
				}
			}
			if n == 1 && b[got] == 'F' {
				continue
			}
			return got, errors.New("fds attached to a reply byte that is not an fd message")
		}
		got += n
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return got, errHang
			}
			if got > 0 && got < len(b) {
				return got, errPartial
			}
			return got, err
		}
		if n == 0 {
			if got > 0 {
				return got, errPartial
			}
			return 0, io.EOF
		}
	}
	return got, nil
}
