package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// The metrics listener (Config.MetricsEndpoint): plain HTTP serving
//
//	/metrics  the registry of Config.Metrics in Prometheus' exposition
//	          formats (promhttp), with the Go runtime's and the process's
//	          collectors beside it;
//	/healthz  200 "ok" while the daemon runs (its accept loop alive);
//	/readyz   200 "ready" once Start returned (every listener accepts), 503
//	          with the reason while the daemon is stopping or, with the etcd
//	          backend, while etcd is lost (unreachable, or the instance's
//	          lease gone): then the cluster does not see this daemon's
//	          objects, and a load balancer should send no new clients.
//
// It serves no objects and reads no request body, so it needs no secret;
// it binds loopback unless told otherwise (cmd/vineyardd's --metrics-host).

// metricsServer is the running metrics listener.
type metricsServer struct {
	ln  net.Listener
	srv *http.Server
}

// listenMetrics binds the metrics listener of cfg (nil for none); it
// serves once startMetrics has a server to report on.
func listenMetrics(endpoint string) (net.Listener, error) {
	if endpoint == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", endpoint)
	if err != nil {
		return nil, fmt.Errorf("server: metrics listener on %s: %w", endpoint, err)
	}
	return ln, nil
}

// readHeaderTimeout bounds a metrics request's header: the listener may be
// reachable off loopback.
const readHeaderTimeout = 10 * time.Second

// startMetrics serves s's metrics and health on ln.
func (s *Server) startMetrics(ln net.Listener) *metricsServer {
	reg := prometheus.NewRegistry()
	reg.MustRegister(s.cfg.Metrics,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		select {
		case <-s.done:
			http.Error(w, "stopped", http.StatusServiceUnavailable)
		default:
			_, _ = w.Write([]byte("ok\n"))
		}
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if err := s.readiness(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	m := &metricsServer{ln: ln, srv: &http.Server{Handler: mux, ReadHeaderTimeout: readHeaderTimeout,
		BaseContext: func(net.Listener) context.Context { return s.ctx }}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		if err := m.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Warn("metrics listener stopped", "err", err)
		}
	}()
	return m
}

// close stops the listener and its open requests.
func (m *metricsServer) close() {
	if m != nil {
		_ = m.srv.Close()
	}
}

// errStopping is readiness's answer while the server stops.
var errStopping = errors.New("the daemon is stopping")

// readiness returns nil when the daemon should get new clients, else why
// not.
func (s *Server) readiness() error {
	select {
	case <-s.ready:
	default:
		return errors.New("starting")
	}
	if s.ctx.Err() != nil {
		return errStopping
	}
	if s.etcd != nil {
		if err := s.etcd.Healthy(); err != nil {
			return err
		}
	}
	return nil
}

// MetricsEndpoint returns the "host:port" the metrics listener is bound
// to (the port it took when Config.MetricsEndpoint asked for 0), or "" when
// there is none.
func (s *Server) MetricsEndpoint() string {
	if s.metrics == nil {
		return ""
	}
	return s.metrics.ln.Addr().String()
}
