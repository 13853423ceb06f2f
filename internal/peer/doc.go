// Package peer is the data plane between daemons: a gRPC service that streams
// the bytes of sealed blobs from the daemon that owns them (the source) into
// blobs allocated in the arena of the daemon that asked (the destination).
//
// The daemon plugs in through two small interfaces. On the source side a
// Source pins a set of blobs for the duration of one stream and hands out
// read-only views of their bytes; the bytes are sent as gRPC messages that
// alias those views (no copy into a message buffer). A stream that succeeds
// keeps its pin until the transport has written every chunk; one that fails
// is never committed by the client. So a concurrent delete on the owner never
// gets reused memory into a committed copy. On the destination side a Sink opens a
// Transfer that allocates one blob per fetched blob; chunks are decoded
// straight into those allocations, and the Transfer is either committed
// (every byte arrived) or aborted (everything it allocated is freed).
//
// Memory is bounded on both sides however large the objects are: the source
// holds no copies (chunks alias the pinned arena) and at most one chunk per
// stream waits in the transport beyond the HTTP/2 flow-control window; the
// destination buffers at most the stream window per stream (received but not
// yet decoded), and streams per fetch are capped by Config.MaxStreams.
//
// Raw data connections (raw.go): without TLS, a stream of at least
// ServerConfig.RawAbove bytes moves them outside gRPC, over a plain TCP
// connection to the same port that presents a one-time ticket from the
// stream's header; the source writes straight from the pinned views and the
// destination reads straight into its blobs, with no user-space buffer on
// either side. Pins, plans, errors and timeouts are those of the stream.
//
// Messages use a codec of their own (see peerpb/peer.proto for the wire
// format, which is protobuf-compatible), forced on both ends, so no other
// gRPC service in the process (etcd) is affected.
//
// Security: a server refuses to listen on a non-loopback address unless peers
// must authenticate, with a shared secret (sent as call metadata, compared in
// constant time by an interceptor) and/or mutual TLS.
package peer
