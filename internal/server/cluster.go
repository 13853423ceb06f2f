package server

import (
	"hash/fnv"
	"net"
	"strconv"
)

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

// rpcEndpoint is the rpc_endpoint the daemon reports in register_reply and
// cluster_meta: host:port of its RPC listener (RPCEndpoint, rpc.go), or in
// upstream's form with the default port when it has none.
func (s *Server) rpcEndpoint() string {
	if ep := s.RPCEndpoint(); ep != "" {
		return ep
	}
	return net.JoinHostPort(hostname, strconv.Itoa(defaultRPCPort))
}
