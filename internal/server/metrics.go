package server

import (
	"sync/atomic"
	"time"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/metrics"
	"github.com/v6d-io/v6d-go/internal/peer"
	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/status"
	"github.com/v6d-io/v6d-go/internal/store"
)

// serverMetrics are the metrics the server registers in Config.Metrics:
// what it sees (requests by type, their durations, errors by code,
// connections by listener, waiting requests, peer transfers) and the
// store's events (it is the store's Observer). The instance_status reply
// reads the same values; the etcd backend registers its own
// (meta/etcd_metrics.go). docs/operations.md lists them all.
type serverMetrics struct {
	requests  *metrics.CounterVec   // by protocol.Kind
	durations *metrics.HistogramVec // by protocol.Kind, while timed
	errors    *metrics.CounterMap   // by status code name
	accepted  *metrics.CounterVec   // by listener
	refused   *metrics.CounterVec   // by listener
	waiting   *metrics.Gauge
	events    *metrics.CounterVec // by store.EventKind
	// Peer transfers by direction: in (fetched by this daemon's
	// migrations) and out (served to other daemons).
	peerTransfers, peerBytes, peerErrors *metrics.CounterVec

	// timed says whether requests are timed into durations: only while the
	// metrics listener runs (Config.MetricsEndpoint), so that a daemon
	// nobody scrapes reads no clock per request.
	timed bool

	// Read at scrape time and by instance_status, from the server once
	// Start has made it (0 before).
	conns                                     *metrics.GaugeFuncVec // by listener
	memUsed, memLimit, memLeased, metaPending *metrics.GaugeFunc
	spilledBytes, spilledBlobs                *metrics.GaugeFunc
	srv                                       atomic.Pointer[Server]
}

// The listener label's values, indexes of the vectors labelled by it.
const (
	listenerIPC = iota
	listenerRPC
)

var listeners = []string{listenerIPC: "ipc", listenerRPC: "rpc"}

// The direction label's values of the peer metrics.
const (
	peerIn = iota
	peerOut
)

var directions = []string{peerIn: "in", peerOut: "out"}

// durationBuckets are the upper bounds of the request durations, in
// seconds: 10 µs (a get answered from memory) to 10 s.
var durationBuckets = []float64{1e-5, 2.5e-5, 5e-5, 1e-4, 2.5e-4, 5e-4, 1e-3, 2.5e-3, 5e-3, 0.01, 0.025, 0.05,
	0.1, 0.25, 0.5, 1, 2.5, 10}

// maxEventKinds bounds the store's event kinds the metrics label.
const maxEventKinds = 32

// newServerMetrics registers the server's metrics in r (a registry serves
// one server: registering twice panics). The figures kept elsewhere are
// read from the server set in m.srv.
func newServerMetrics(r *metrics.Registry, timed bool) *serverMetrics {
	m := &serverMetrics{}
	read := func(f func(s *Server) int64) func() int64 {
		return func() int64 {
			if s := m.srv.Load(); s != nil {
				return f(s)
			}
			return 0
		}
	}
	counts := func(f func(c store.Counts) int) func() int64 {
		return read(func(s *Server) int64 { return int64(f(s.store.Counts())) })
	}
	kinds := make([]string, protocol.NumKinds)
	for k := range protocol.NumKinds {
		kinds[k] = k.String()
	}
	events := make([]string, maxEventKinds)
	for k := range store.EventKind(maxEventKinds) {
		if n := k.String(); n != "unknown" {
			events[k] = n
		}
	}
	usage := func(used bool) func() int64 {
		return read(func(s *Server) int64 {
			u, l := s.store.Usage()
			if used {
				return int64(u)
			}
			return int64(l)
		})
	}
	*m = serverMetrics{
		timed:    timed,
		requests: r.CounterVec("vineyard_requests_total", "Requests decoded, by type.", "type", kinds),
		durations: r.HistogramVec("vineyard_request_duration_seconds",
			"Time from a request's decoding to its answer, waits excluded, by type (while the metrics listener runs).",
			"type", kinds, durationBuckets),
		errors: r.CounterMap("vineyard_request_errors_total", "Error replies, by status code.", "code"),
		accepted: r.CounterVec("vineyard_connections_accepted_total", "Client connections accepted, by listener.",
			"listener", listeners),
		refused: r.CounterVec("vineyard_connections_refused_total",
			"Client connections refused over the listener's connection limit, by listener.", "listener", listeners),
		waiting: r.Gauge("vineyard_waiting_requests", "Requests waiting for an object or a name to appear."),
		events:  r.CounterVec("vineyard_store_events_total", "Changes of the store, by kind of event.", "kind", events),
		peerTransfers: r.CounterVec("vineyard_peer_transfers_total",
			"Blob transfers between daemons: in, fetched by this daemon's migrations; out, served to others.",
			"direction", directions),
		peerBytes: r.CounterVec("vineyard_peer_bytes_total",
			"Bytes of blobs moved between daemons (out: counted when a peer's fetch pins them).", "direction", directions),
		peerErrors: r.CounterVec("vineyard_peer_transfer_errors_total", "Blob transfers between daemons that failed.",
			"direction", directions),
		memUsed:  r.GaugeFunc("vineyard_memory_used_bytes", "Bytes of the arena allocated to blobs.", usage(true)),
		memLimit: r.GaugeFunc("vineyard_memory_limit_bytes", "Size of the arena.", usage(false)),
		memLeased: r.GaugeFunc("vineyard_memory_leased_bytes", "Bytes of the arena leased to clients, not yet used.",
			read(func(s *Server) int64 { return int64(s.store.Leased()) })),
		metaPending: r.GaugeFunc("vineyard_meta_pending", "Metadata changes not yet written to the backend.",
			read(func(s *Server) int64 { return int64(s.store.MetaPending()) })),
	}
	m.conns = r.GaugeFuncVec("vineyard_connections", "Open client connections, by listener.", "listener", listeners,
		func(i int) int64 {
			s := m.srv.Load()
			if s == nil {
				return 0
			}
			rpc := s.rpcConnections()
			if i == listenerRPC {
				return int64(rpc)
			}
			return int64(s.connections() - rpc)
		})
	m.spilledBytes = r.GaugeFunc("vineyard_memory_spilled_bytes", "Bytes of blobs spilled out of the arena to files.",
		read(func(s *Server) int64 { return int64(s.store.SpillStats().Bytes) }))
	m.spilledBlobs = r.GaugeFunc("vineyard_spilled_blobs", "Blobs whose bytes are spilled to files.",
		read(func(s *Server) int64 { return int64(s.store.SpillStats().Blobs) }))
	r.GaugeFunc("vineyard_streams", "Streams in the daemon, open or stopped, until dropped.",
		read(func(s *Server) int64 { return int64(s.streams.Len()) }))
	r.GaugeFunc("vineyard_objects", "Objects (not blobs) of this instance in the store.",
		counts(func(c store.Counts) int { return c.Objects }))
	r.GaugeFunc("vineyard_blobs", "Blobs in the store, sealed or not.", counts(func(c store.Counts) int { return c.Blobs }))
	r.GaugeFunc("vineyard_zombie_blobs", "Deleted blobs whose memory a reader still holds.",
		counts(func(c store.Counts) int { return c.Zombies }))
	r.GaugeFunc("vineyard_remote_objects", "Persisted objects of other instances known here.",
		counts(func(c store.Counts) int { return c.Remote }))
	r.GaugeFunc("vineyard_directory_entries",
		"Objects and blobs published in the shared-memory directory: gets of them take no round trip "+
			"(the daemon does not see those gets).", counts(func(c store.Counts) int { return c.Directory }))
	return m
}

// StoreEvent counts a store event (store.Observer): one atomic add.
func (m *serverMetrics) StoreEvent(e store.Event) {
	m.events.Inc(int(e.Kind))
}

// requestError counts an error reply.
func (m *serverMetrics) requestError(err error) { m.errors.Inc(status.CodeOf(err).String()) }

// begin returns the start of a request for done, or the zero time when
// requests are not timed.
func (m *serverMetrics) begin() time.Time {
	if !m.timed {
		return time.Time{}
	}
	return time.Now()
}

// done records the duration of a request of kind begun at start.
func (m *serverMetrics) done(kind protocol.Kind, start time.Time) {
	if m.timed {
		m.durations.Observe(int(kind), time.Since(start).Seconds())
	}
}

// fetched counts a transfer this daemon fetched from a peer.
func (m *serverMetrics) fetched(got []peer.LocalBlob, err error) {
	if err != nil {
		m.peerErrors.Inc(peerIn)
		return
	}
	m.peerTransfers.Inc(peerIn)
	var n uint64
	for _, b := range got {
		n += b.Size
	}
	m.peerBytes.Add(peerIn, n)
}

// countingSource is the peer service's Source, counting what it serves.
type countingSource struct {
	peer.Source
	m *serverMetrics
}

// Pin pins blobs for a peer's fetch and counts the transfer.
func (c countingSource) Pin(blobs []ids.ObjectID) ([][]byte, func(), error) {
	views, unpin, err := c.Source.Pin(blobs)
	if err != nil {
		c.m.peerErrors.Inc(peerOut)
		return nil, nil, err
	}
	c.m.peerTransfers.Inc(peerOut)
	var n int
	for _, v := range views {
		n += len(v)
	}
	c.m.peerBytes.Add(peerOut, uint64(n))
	return views, unpin, nil
}

// instanceStatus is the instance_status reply's figures, from the metrics.
func (m *serverMetrics) instanceStatus(s *Server) protocol.InstanceStatus {
	return protocol.InstanceStatus{
		InstanceID:       s.store.InstanceID(),
		Deployment:       s.cfg.Deployment,
		MemoryUsage:      uint64(m.memUsed.Value()),
		MemoryLimit:      uint64(m.memLimit.Value()),
		MemoryLeased:     uint64(m.memLeased.Value()),
		DeferredRequests: int(m.waiting.Value()),
		IPCConnections:   int(m.conns.Value(listenerIPC)),
		RPCConnections:   int(m.conns.Value(listenerRPC)),
		MetaPending:      int(m.metaPending.Value()),
		SpilledObjects:   int(m.spilledBlobs.Value()),
		SpilledBytes:     uint64(m.spilledBytes.Value()),
	}
}
