package meta

import (
	"context"
	"path"

	"google.golang.org/grpc"

	"github.com/v6d-io/v6d-go/internal/metrics"
)

// etcdMetrics count the backend's calls to etcd, by gRPC method (Range,
// Txn, LeaseGrant, Watch...), and its failures, from interceptors on the
// client's connection: every call is counted in this one place.
type etcdMetrics struct {
	calls, errors *metrics.CounterMap
}

// newEtcdMetrics registers the backend's metrics in r (nil: none) and
// returns them (nil with no registry) and the dial options that feed them.
func newEtcdMetrics(r *metrics.Registry, e *Etcd) (*etcdMetrics, []grpc.DialOption) {
	if r == nil {
		return nil, nil
	}
	m := &etcdMetrics{
		calls: r.CounterMap("vineyard_etcd_requests_total",
			"Calls to etcd by gRPC method (a watch or lease keep-alive stream counts once, when opened).", "method"),
		errors: r.CounterMap("vineyard_etcd_request_errors_total",
			"Calls to etcd that failed, by gRPC method; \"unreachable\": calls refused at once while etcd is known unreachable.",
			"method"),
	}
	r.GaugeFunc("vineyard_etcd_lease_held",
		"1 while this instance holds its etcd lease (registered in the cluster), 0 while it is lost.",
		func() int64 {
			if e.leaseLost.Load() {
				return 0
			}
			return 1
		})
	return m, []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn,
			invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			err := invoker(ctx, method, req, reply, cc, opts...)
			m.count(method, err)
			return err
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string,
			streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			s, err := streamer(ctx, desc, cc, method, opts...)
			m.count(method, err)
			return s, err
		}),
	}
}

// count counts one call of method ("/etcdserverpb.KV/Range": labelled Range).
func (m *etcdMetrics) count(method string, err error) {
	name := path.Base(method)
	m.calls.Inc(name)
	if err != nil {
		m.errors.Inc(name)
	}
}

// unreachable counts a call refused at once because etcd is unreachable.
func (m *etcdMetrics) unreachable() {
	if m != nil {
		m.errors.Inc("unreachable")
	}
}
