package peer

import "errors"

// ErrObjectNotExists is returned by Fetch when the source has no such blob
// (never had it, or it was deleted before it could be pinned). Sources wrap it
// in the error their Pin returns.
var ErrObjectNotExists = errors.New("peer: blob does not exist on the source")

// ErrUnauthenticated is returned by Fetch when the source refused the
// credentials of this client (wrong or missing secret, TLS client certificate
// not accepted).
var ErrUnauthenticated = errors.New("peer: not authenticated by the source")

// ErrUnavailable is returned by Fetch when the source could not be reached
// or the connection to it was lost (source killed, network dropped).
var ErrUnavailable = errors.New("peer: source unavailable")

// ErrStalled is returned by Fetch when no message arrived on a stream for
// Config.IdleTimeout: the source died, the network dropped, or it is wedged.
var ErrStalled = errors.New("peer: transfer stalled")

// ErrProtocol is returned by Fetch when the source sent something that does
// not fit the request (wrong sizes, chunks out of place, missing bytes).
var ErrProtocol = errors.New("peer: protocol violation")

// ErrBadRequest is returned for invalid arguments: no blob ids, duplicate
// ids, an id that is not a blob id, or an empty endpoint.
var ErrBadRequest = errors.New("peer: bad request")

// ErrInsecure is returned by Listen when asked to listen on a non-loopback
// address without a shared secret or mutual TLS.
var ErrInsecure = errors.New("peer: refusing a non-loopback address without authentication")

// ErrClosed is returned by a Client or Server used after Close.
var ErrClosed = errors.New("peer: closed")
