// Package status is Vineyard's status codes and the error type that carries
// one. Every layer uses it: the store returns these errors, the protocol
// sends them as {"code": N, "message": "..."}, the client relays them, and
// libv6d turns them into v6d_status values (include/v6d.h mirrors the codes,
// as python/vineyard/errors.py does; a test checks all three agree).
package status

import (
	"errors"
	"fmt"
)

// Code is a Vineyard status code. The values are upstream's StatusCode enum and
// travel on the wire as the "code" of an error reply.
type Code int32

// Upstream Vineyard status codes (src/common/util/status.h).
const (
	OK                       Code = 0
	Invalid                  Code = 1
	KeyError                 Code = 2
	TypeError                Code = 3
	IOError                  Code = 4
	EndOfFile                Code = 5
	NotImplemented           Code = 6
	AssertionFailed          Code = 7
	UserInputError           Code = 8
	ObjectExists             Code = 11
	ObjectNotExists          Code = 12
	ObjectSealed             Code = 13
	ObjectNotSealed          Code = 14
	ObjectIsBlob             Code = 15
	ObjectTypeError          Code = 16
	ObjectSpilled            Code = 17
	ObjectNotSpilled         Code = 18
	MetaTreeInvalid          Code = 21
	MetaTreeTypeInvalid      Code = 22
	MetaTreeTypeNotExists    Code = 23
	MetaTreeNameInvalid      Code = 24
	MetaTreeNameNotExists    Code = 25
	MetaTreeLinkInvalid      Code = 26
	MetaTreeSubtreeNotExists Code = 27
	VineyardServerNotReady   Code = 31
	ArrowError               Code = 32
	ConnectionFailed         Code = 33
	ConnectionError          Code = 34
	EtcdError                Code = 35
	AlreadyStopped           Code = 36
	RedisError               Code = 37
	NotEnoughMemory          Code = 41
	StreamDrained            Code = 42
	StreamFailed             Code = 43
	InvalidStreamState       Code = 44
	StreamOpened             Code = 45
	GlobalObjectInvalid      Code = 51
	UnknownError             Code = 255

	// Codes of this implementation, never sent on the wire by upstream. They
	// mirror include/v6d.h.

	// InvalidHandle: a C-ABI handle is 0, closed or unknown.
	InvalidHandle Code = 1000
	// Timeout: a blocking call gave up after its timeout.
	Timeout Code = 1001
	// Internal: the library caught an internal fault.
	Internal Code = 1002
	// Forked: a C-ABI call in a child forked from a process that loaded
	// libv6d (the C shim answers it; the Go runtime does not survive fork).
	Forked Code = 1003
)

var codeNames = map[Code]string{
	OK: "OK", Invalid: "Invalid", KeyError: "KeyError", TypeError: "TypeError",
	IOError: "IOError", EndOfFile: "EndOfFile", NotImplemented: "NotImplemented",
	AssertionFailed: "AssertionFailed", UserInputError: "UserInputError",
	ObjectExists: "ObjectExists", ObjectNotExists: "ObjectNotExists",
	ObjectSealed: "ObjectSealed", ObjectNotSealed: "ObjectNotSealed",
	ObjectIsBlob: "ObjectIsBlob", ObjectTypeError: "ObjectTypeError",
	ObjectSpilled: "ObjectSpilled", ObjectNotSpilled: "ObjectNotSpilled",
	MetaTreeInvalid: "MetaTreeInvalid", MetaTreeTypeInvalid: "MetaTreeTypeInvalid",
	MetaTreeTypeNotExists: "MetaTreeTypeNotExists", MetaTreeNameInvalid: "MetaTreeNameInvalid",
	MetaTreeNameNotExists: "MetaTreeNameNotExists", MetaTreeLinkInvalid: "MetaTreeLinkInvalid",
	MetaTreeSubtreeNotExists: "MetaTreeSubtreeNotExists",
	VineyardServerNotReady:   "VineyardServerNotReady", ArrowError: "ArrowError",
	ConnectionFailed: "ConnectionFailed", ConnectionError: "ConnectionError",
	EtcdError: "EtcdError", AlreadyStopped: "AlreadyStopped", RedisError: "RedisError",
	NotEnoughMemory: "NotEnoughMemory", StreamDrained: "StreamDrained",
	StreamFailed: "StreamFailed", InvalidStreamState: "InvalidStreamState",
	StreamOpened: "StreamOpened", GlobalObjectInvalid: "GlobalObjectInvalid",
	UnknownError: "UnknownError", InvalidHandle: "InvalidHandle", Timeout: "Timeout",
	Internal: "Internal", Forked: "Forked",
}

// String returns the upstream name of the code, e.g. "ObjectNotExists".
func (c Code) String() string {
	if n, ok := codeNames[c]; ok {
		return n
	}
	return fmt.Sprintf("Code(%d)", int32(c))
}

// Error is an error with a Vineyard status code. Errors that reach a client are
// of this type; the daemon sends them as {"code": N, "message": "..."}.
type Error struct {
	Code    Code
	Message string
}

func (e *Error) Error() string {
	if e.Message == "" {
		return e.Code.String()
	}
	return e.Code.String() + ": " + e.Message
}

// Is makes errors.Is(err, &Error{Code: c}) match any Error with code c.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code && t.Message == ""
}

// Errorf returns an *Error with the given code and formatted message.
func Errorf(code Code, format string, args ...any) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// CodeOf returns the status code carried by err: OK for nil, the code of the
// first *Error in its chain, otherwise UnknownError.
func CodeOf(err error) Code {
	if err == nil {
		return OK
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return UnknownError
}

// AsError converts err to an *Error, keeping its code if it has one (and the
// full message of the chain), else UnknownError.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		if e == err { //nolint:errorlint // identity: err is itself the *Error
			return e
		}
		return &Error{Code: e.Code, Message: err.Error()}
	}
	return &Error{Code: UnknownError, Message: err.Error()}
}
