package server

import (
	"sync/atomic"

	"github.com/v6d-io/v6d-go/internal/metrics"
	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/status"
	"github.com/v6d-io/v6d-go/internal/store"
)

// serverMetrics are the metrics the server registers in Config.Metrics:
// what it sees (requests by type, errors by code, connections, waiting
// requests) and the store's events (it is the store's Observer). The
// instance_status reply reads the same values.
type serverMetrics struct {
	requests *metrics.CounterVec // by protocol.Kind
	errors   *metrics.CounterMap // by status code name
	accepted *metrics.Counter
	refused  *metrics.Counter
	waiting  *metrics.Gauge
	events   *metrics.CounterVec // by store.EventKind

	// Read at scrape time and by instance_status, from the server once
	// Start has made it (0 before).
	ipcConns, rpcConns, memUsed, memLimit, memLeased, metaPending *metrics.GaugeFunc
	srv                                                           atomic.Pointer[Server]
}

// maxEventKinds bounds the store's event kinds the metrics label.
const maxEventKinds = 32

// newServerMetrics registers the server's metrics in r (a registry serves
// one server: registering twice panics). The figures kept elsewhere are
// read from the server set in m.srv.
func newServerMetrics(r *metrics.Registry) *serverMetrics {
	m := &serverMetrics{}
	read := func(f func(s *Server) int64) func() int64 {
		return func() int64 {
			if s := m.srv.Load(); s != nil {
				return f(s)
			}
			return 0
		}
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
		requests: r.CounterVec("vineyardd_requests_total", "Requests decoded, by type.", "type", kinds),
		errors:   r.CounterMap("vineyardd_request_errors_total", "Error replies, by status code.", "code"),
		accepted: r.Counter("vineyardd_connections_accepted_total", "Client connections accepted (UNIX and TCP)."),
		refused: r.Counter("vineyardd_connections_refused_total",
			"Client connections refused over the connection limit."),
		waiting: r.Gauge("vineyardd_waiting_requests", "Requests waiting for an object or a name to appear."),
		events:  r.CounterVec("vineyardd_store_events_total", "Changes of the store, by kind of event.", "kind", events),
		ipcConns: r.GaugeFunc("vineyardd_ipc_connections", "Open client connections on the UNIX socket.",
			read(func(s *Server) int64 { return int64(s.connections() - s.rpcConnections()) })),
		rpcConns: r.GaugeFunc("vineyardd_rpc_connections", "Open client connections over TCP.",
			read(func(s *Server) int64 { return int64(s.rpcConnections()) })),
		memUsed:  r.GaugeFunc("vineyardd_memory_used_bytes", "Bytes of the arena allocated to blobs.", usage(true)),
		memLimit: r.GaugeFunc("vineyardd_memory_limit_bytes", "Size of the arena.", usage(false)),
		memLeased: r.GaugeFunc("vineyardd_memory_leased_bytes", "Bytes of the arena leased to clients, not yet used.",
			read(func(s *Server) int64 { return int64(s.store.Leased()) })),
		metaPending: r.GaugeFunc("vineyardd_meta_pending", "Metadata changes not yet written to the backend.",
			read(func(s *Server) int64 { return int64(s.store.MetaPending()) })),
	}
	return m
}

// StoreEvent counts a store event (store.Observer): one atomic add.
func (m *serverMetrics) StoreEvent(e store.Event) { m.events.Inc(int(e.Kind)) }

// requestError counts an error reply.
func (m *serverMetrics) requestError(err error) { m.errors.Inc(status.CodeOf(err).String()) }

// instanceStatus is the instance_status reply's figures, from the metrics.
func (m *serverMetrics) instanceStatus(s *Server) protocol.InstanceStatus {
	return protocol.InstanceStatus{
		InstanceID:       s.store.InstanceID(),
		Deployment:       s.cfg.Deployment,
		MemoryUsage:      uint64(m.memUsed.Value()),
		MemoryLimit:      uint64(m.memLimit.Value()),
		MemoryLeased:     uint64(m.memLeased.Value()),
		DeferredRequests: int(m.waiting.Value()),
		IPCConnections:   int(m.ipcConns.Value()),
		RPCConnections:   int(m.rpcConns.Value()),
		MetaPending:      int(m.metaPending.Value()),
	}
}
