package server

import (
	"sync/atomic"
	"testing"

	"github.com/v6d-io/v6d-go/internal/protocol"
)

// TestResponderPushAndDefer: a handler may push frames ahead of its answer
// and defer the answer to another goroutine; the client gets the pushed
// frames, then the answer, in order, and the connection goes on serving.
// A handler that answers nothing is an internal error, not a hang.
func TestResponderPushAndDefer(t *testing.T) {
	saved := handlers[protocol.KindDebug]
	t.Cleanup(func() { handlers[protocol.KindDebug] = saved })
	var mode atomic.Value // written here, read by the connection's goroutine
	handlers[protocol.KindDebug] = answers(func(c *conn, _ *protocol.DebugRequest, rs *responder) error {
		switch mode.Load() {
		case "defer":
			for _, item := range []string{`{"type":"item","n":1}`, `{"type":"item","n":2}`} {
				if !rs.Push([]byte(item)) {
					return errExit
				}
			}
			p := rs.Defer()
			go p.Reply(&protocol.AckReply{}, nil)
		case "fail":
			p := rs.Defer()
			go p.Fail(errMisrouted(&protocol.DebugRequest{}))
		case "never":
			rs.Defer() // nobody answers: only the client going away ends the wait
		case "silent":
		}
		return nil
	})
	s := start(t)
	r := dial(t, s)
	r.rpc(`{"type":"register_request","version":"0.24.0"}`)

	mode.Store("defer")
	r.send(`{"type":"debug_command"}`)
	for n := 1.0; n <= 2; n++ {
		if m := r.recv(); m["type"] != "item" || m["n"] != n {
			t.Fatalf("pushed frame %v: %v", n, m)
		}
	}
	if m := r.recv(); m["type"] != "debug_reply" {
		t.Fatalf("deferred answer: %v", m)
	}
	mode.Store("fail")
	if m := r.rpc(`{"type":"debug_command"}`); m["code"] == nil {
		t.Fatalf("failed deferred answer: %v", m)
	}
	mode.Store("silent")
	if m := r.rpc(`{"type":"debug_command"}`); m["code"] == nil {
		t.Fatalf("a handler that answered nothing: %v", m)
	}
	if m := r.rpc(`{"type":"exists_request","id":1}`); m["type"] != "exists_reply" {
		t.Fatalf("after: %v", m)
	}

	// A deferred answer that never comes ends when the client goes away,
	// learnt from the poller's hang-up (no polling).
	mode.Store("never")
	r.send(`{"type":"debug_command"}`)
	eventually(t, "the deferred request to wait", func() bool { return s.waitingCount() == 1 })
	_ = r.c.Close()
	eventually(t, "the wait to end", func() bool { return s.waitingCount() == 0 })
}
