package server

import (
	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/status"
)

// responder is how a handler answers its request. The handler either
// returns an error (handleFrame sends it as the answer) or calls exactly one
// of:
//
//   - Reply: the answer is this reply and the fds sent after it;
//   - None: the request takes no answer, or the handler already sent it
//     itself (a reply followed by raw bytes on a TCP connection);
//   - Defer: the answer comes later, from any goroutine, through the
//     returned pending answer; the connection reads no further request
//     until it has come (replies go out in request order), and gives up
//     when the client goes away or the daemon stops.
//
// Before its answer a handler may Push frames (a stream's items): they go
// out at once, ahead of the answer.
//
// A connection has one responder, reset for each request, so answering
// allocates nothing (a Defer allocates its pending answer).
type responder struct {
	c       *conn
	state   answerState
	reply   protocol.Reply
	fds     []int
	pending *pendingAnswer
}

type answerState uint8

const (
	unanswered answerState = iota
	replied
	noAnswer
	deferred
)

// reset readies the responder for the next request.
func (rs *responder) reset() {
	rs.state, rs.reply, rs.fds, rs.pending = unanswered, nil, nil, nil
}

// Reply answers with reply, then fds (which the reply announces).
// handleFrame sets the reply's type.
func (rs *responder) Reply(reply protocol.Reply, fds []int) {
	rs.state, rs.reply, rs.fds = replied, reply, fds
}

// None says the request takes no answer (or the handler sent it).
func (rs *responder) None() { rs.state = noAnswer }

// Push sends body as a frame now, ahead of the answer; it reports false
// when the client went away.
func (rs *responder) Push(body []byte) bool {
	ok := rs.c.writeFrame(body)
	return ok && rs.c.flush(nil)
}

// Defer says the answer comes later, through the pending answer returned.
func (rs *responder) Defer() *pendingAnswer {
	rs.state = deferred
	rs.pending = &pendingAnswer{done: make(chan struct{})}
	return rs.pending
}

// pendingAnswer is a deferred request's answer: whoever has it calls Reply
// or Fail once, from any goroutine.
type pendingAnswer struct {
	done  chan struct{}
	reply protocol.Reply
	fds   []int
	err   error
}

// Reply completes the answer with a reply and the fds it announces.
func (p *pendingAnswer) Reply(reply protocol.Reply, fds []int) {
	p.reply, p.fds = reply, fds
	close(p.done)
}

// Fail completes the answer with an error.
func (p *pendingAnswer) Fail(err error) {
	p.err = err
	close(p.done)
}

// await waits for a deferred answer through conn.waitFor (the client's
// hang-up learnt from the poller, no polling); it returns the answer, or an
// error when the client went away or the daemon stops first.
func (rs *responder) await() (protocol.Reply, []int, error) {
	p := rs.pending
	_, err := rs.c.waitFor(-1, func() (bool, <-chan struct{}, func(), error) {
		select {
		case <-p.done:
			return true, nil, nil, nil
		default:
			return false, p.done, nil, nil
		}
	})
	if err != nil {
		return nil, nil, err
	}
	return p.reply, p.fds, p.err
}

// answer runs the handler of kind for req and returns its answer: the
// reply to send (nil for none), its fds, or the error to send.
func (rs *responder) answer(kind protocol.Kind, req protocol.Request) (protocol.Reply, []int, error) {
	rs.reset()
	if err := handlers[kind](rs.c, req, rs); err != nil {
		return nil, nil, err
	}
	switch rs.state {
	case replied:
		return rs.reply, rs.fds, nil
	case deferred:
		return rs.await()
	case noAnswer:
		return nil, nil, nil
	}
	return nil, nil, status.Errorf(status.UnknownError, "internal error: the %s handler gave no answer", req.RequestType())
}
