package server

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"strconv"
	"time"

	"github.com/v6d-io/v6d-go/internal/etcdlaunch"
	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/meta"
	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/status"
)

// openEtcd opens the etcd metadata backend of a Config with Meta "etcd"
// (nil, nil for "local"): it connects and registers this instance within
// cfg.EtcdTimeout, or fails with an error naming the endpoints. The caller
// owns the backend (Start hands it to the store, which closes it).
func openEtcd(cfg Config, rpcEndpoint, peerEndpoint string) (*meta.Etcd, error) {
	if cfg.Meta != "etcd" {
		return nil, nil
	}
	var tlsCfg *tls.Config
	if cfg.EtcdCACert != "" || cfg.EtcdCert != "" || cfg.EtcdKey != "" {
		var err error
		if tlsCfg, err = meta.EtcdTLS(cfg.EtcdCACert, cfg.EtcdCert, cfg.EtcdKey); err != nil {
			return nil, fmt.Errorf("server: %w", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.EtcdTimeout)
	defer cancel()
	e, err := meta.OpenEtcd(ctx, meta.EtcdConfig{
		TLS:          tlsCfg,
		Username:     cfg.EtcdUser,
		Password:     cfg.EtcdPassword,
		Endpoints:    cfg.EtcdEndpoints,
		Prefix:       cfg.EtcdPrefix,
		DialTimeout:  cfg.EtcdTimeout,
		LeaseTTL:     cfg.EtcdLeaseTTL,
		Hostname:     hostname,
		IPCSocket:    cfg.Socket,
		RPCEndpoint:  rpcEndpoint,
		PeerEndpoint: peerEndpoint,
		Logger:       cfg.Logger,
		Metrics:      cfg.Metrics,
	})
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	return e, nil
}

// launchEtcd launches Config.EtcdCmd when no etcd answers at the first of
// the endpoints and that endpoint is on this machine, as upstream's
// --etcd_cmd does; it returns nil when nothing was launched (no EtcdCmd,
// an etcd answers, or the endpoint is another machine's: then the daemon
// waits for that etcd as for any). The caller owns the process.
func launchEtcd(cfg Config) (*etcdlaunch.Process, error) {
	if cfg.Meta != "etcd" || cfg.EtcdCmd == "" {
		return nil, nil
	}
	p, err := etcdlaunch.Ensure(etcdlaunch.Config{Cmd: cfg.EtcdCmd, Endpoint: cfg.EtcdEndpoints[0], DataDir: cfg.EtcdDataDir,
		Timeout: max(cfg.EtcdTimeout, launchTimeout), Logger: cfg.Logger})
	if errors.Is(err, etcdlaunch.ErrNotLocal) {
		cfg.Logger.Info("etcd not launched: its endpoint is not on this machine; waiting for it", "endpoint",
			cfg.EtcdEndpoints[0], "etcd_cmd", cfg.EtcdCmd)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	return p, nil
}

// launchTimeout is the least time a launched etcd has to start serving.
const launchTimeout = 30 * time.Second

// clusterMeta answers cluster_meta in upstream's shape, {"i<N>": {instance_id,
// hostid, hostname, nodename, ipc_socket, rpc_endpoint, timestamp}}: every
// live instance of the cluster, read from etcd (an EtcdError when etcd does
// not answer), or this daemon alone with the local backend.
func (c *conn) clusterMeta(_ *protocol.ClusterMetaRequest) (protocol.Reply, []int, error) {
	s := c.s
	var infos map[uint64]meta.InstanceInfo
	if s.etcd != nil {
		ctx, cancel := context.WithTimeout(s.ctx, s.cfg.EtcdTimeout)
		defer cancel()
		var err error
		if infos, err = s.etcd.Instances(ctx); err != nil {
			return nil, nil, status.Errorf(status.EtcdError, "cluster_meta: %v", err)
		}
	} else {
		id := s.store.InstanceID()
		infos = map[uint64]meta.InstanceInfo{id: {
			InstanceID:  id,
			HostID:      hostID,
			Hostname:    hostname,
			Nodename:    hostname,
			IPCSocket:   s.cfg.Socket,
			RPCEndpoint: s.rpcEndpoint(),
			Timestamp:   time.Now().Unix(), // seconds, as meta.Etcd registers
		}}
	}
	out := make(map[string]meta.InstanceInfo, len(infos))
	for id, info := range infos {
		out["i"+strconv.FormatUint(id, 10)] = info
	}
	body, err := json.Marshal(out)
	return &protocol.ClusterMetaReply{Meta: body}, nil, err
}

// syncRemote waits, at most Config.EtcdTimeout, until the store has applied
// every change etcd had when it was called (get_data's sync_remote). It does
// nothing with the local backend. The caller decides whether a failure
// (etcd down) matters: a get answers from what the daemon has anyway, so
// that local gets keep working while etcd is away.
func (s *Server) syncRemote() error {
	if s.etcd == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.cfg.EtcdTimeout)
	defer cancel()
	if err := s.store.Sync(ctx); err != nil {
		s.log.Debug("sync with etcd failed; answering from what this daemon has", "err", err)
		return err
	}
	return nil
}

// syncIfMissing syncs with etcd (as syncRemote) when asked to, or when one
// of idl is not known here: an object persisted on another instance a moment
// ago is then found, so a persist on one daemon followed by a get on another
// never misses, while a get of objects known here never waits on etcd. It
// returns the sync's error, nil when it did not sync or the sync worked.
func (c *conn) syncIfMissing(always bool, idl []ids.ObjectID) error {
	s := c.s
	if s.etcd == nil {
		return nil
	}
	if !always {
		for _, id := range idl {
			if !s.store.Exists(id) {
				always = true
				break
			}
		}
	}
	if always {
		return s.syncRemote()
	}
	return nil
}

// errText is err's message, "" for nil (get_data_reply's sync_error).
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// defaultRPCPort is upstream's --rpc_socket_port default. Upstream's daemon
// reports host:port as its rpc_endpoint even when started with --norpc, and
// its clients expect the field in that form.
const defaultRPCPort = 9600

// hostID is the cluster info's "hostid": an integer, as upstream's (a hash
// of the host name, stable across restarts on one host).
var hostID = func() uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(hostname))
	return h.Sum64() >> 1 // fits an int64: readers that parse signed keep it
}()

// publishedRPCEndpoint is the rpc_endpoint a daemon whose TCP listener is ln
// (nil for none) reports: rpcEndpoint's answer, for the etcd registration,
// which is written before the Server exists.
func publishedRPCEndpoint(ln *net.TCPListener) string {
	return (&Server{rpcLn: ln}).rpcEndpoint()
}

// rpcEndpoint is the rpc_endpoint the daemon reports in register_reply and
// cluster_meta: host:port of its RPC listener (RPCEndpoint, rpc.go), or in
// upstream's form with the default port when it has none.
func (s *Server) rpcEndpoint() string {
	if ep := s.RPCEndpoint(); ep != "" {
		return ep
	}
	return net.JoinHostPort(hostname, strconv.Itoa(defaultRPCPort))
}
