package meta

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"maps"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/connectivity"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/metrics"
)

// Etcd is the Backend of a daemon in a cluster: persisted trees, names and
// the instance list live in etcd under EtcdConfig.Prefix, and a watch on the
// prefix reports what other daemons change through Changes.
//
// Every key this instance writes is attached to its lease, kept alive in the
// background: when the lease expires (the daemon died, or was cut off from
// etcd for longer than the TTL), etcd itself deletes the instance's
// registration, trees and names, and every other daemon's watch sees them go.
// Writes are etcd transactions with compares on the keys they touch; there
// is no global lock. Every call to etcd is bounded by EtcdConfig.DialTimeout
// and fails with an error wrapping ErrEtcd that names the endpoints.
//
// When the lease is lost anyway (etcd unreachable for longer than the TTL),
// the instance registers again under the same id as soon as etcd answers,
// and writes its trees and names again, so the others see them again.
//
// Locking: Etcd.mu guards the lease, the sets of remote trees and of names
// reported, the copies of this instance's trees and names, and the closed
// flag; it is never held while calling etcd or sending on Changes.
type Etcd struct {
	cfg      EtcdConfig
	root     string // the prefix with a trailing "/"
	cli      *clientv3.Client
	instance uint64
	info     []byte // the JSON registration of this instance
	changes  chan Change
	page     int64           // trees per request of a full read (resyncPage at Open)
	ctx      context.Context // canceled by Close
	cancel   context.CancelFunc
	wg       sync.WaitGroup

	mu     sync.Mutex
	lease  clientv3.LeaseID
	remote map[ids.ObjectID]struct{} // trees of other instances reported as Persisted
	names  map[string]ids.ObjectID   // names reported as NamePut (and not dropped since)
	closed bool
	// What this instance wrote, published again under a new lease when the
	// old one was lost (etcd deleted it all then).
	ownTrees  map[ids.ObjectID][]byte
	ownNames  map[string]ids.ObjectID
	republish bool // a new lease was granted; ownTrees and ownNames are not yet written again
	// The outbox (etcd_outbox.go): the last queued change per key.
	out       map[string]*outOp
	outSeq    uint64
	outLogged bool // the outage's warning was logged

	// outMu serializes the writes of queued changes and publishOwn, so
	// etcd gets the changes of one key in order. Taken before mu.
	outMu   sync.Mutex
	outKick chan struct{} // wakes the reconciler

	// leaseLost is set while the instance's lease is lost and it is not
	// registered again (keepAlive); Healthy reports it.
	leaseLost atomic.Bool
	em        *etcdMetrics // nil without EtcdConfig.Metrics

	// beforeNameTxn, when set (tests), runs in PutName between reading the
	// name and the transaction that sets it.
	beforeNameTxn func()
}

var _ Backend = (*Etcd)(nil)

// EtcdConfig configures an Etcd backend.
type EtcdConfig struct {
	// Endpoints are etcd's client URLs, e.g. "http://127.0.0.1:2379".
	Endpoints []string
	// Prefix is the key prefix; daemons with the same prefix form one
	// cluster. Empty means DefaultEtcdPrefix.
	Prefix string
	// DialTimeout bounds the connection at Open and every later call to
	// etcd. 0 means DefaultEtcdTimeout.
	DialTimeout time.Duration
	// LeaseTTL is the lease of this instance: how long after the daemon dies
	// (or loses etcd) its instance and objects disappear. It is rounded up
	// to whole seconds; 0 means DefaultLeaseTTL.
	LeaseTTL time.Duration
	// TLS, when set, is the client's TLS configuration (EtcdTLS builds one
	// from PEM files); endpoints are then https:// URLs.
	TLS *tls.Config
	// Username and Password, when Username is set, authenticate the client
	// to etcd (etcd's auth must be enabled for them to matter).
	Username, Password string
	// Hostname (os.Hostname() when empty), IPCSocket, RPCEndpoint and
	// PeerEndpoint are published in the instance's registration.
	Hostname, IPCSocket, RPCEndpoint, PeerEndpoint string
	// Metrics, when set, is the registry the backend registers its metrics
	// in (etcd_metrics.go): calls and errors by method, the lease's state.
	Metrics *metrics.Registry
	// Logger receives a warning when the lease is lost and a note when the
	// instance is registered again (slog.Default() when nil): meanwhile the
	// other instances do not see this one's objects.
	Logger *slog.Logger
}

// Defaults of EtcdConfig.
const (
	DefaultEtcdPrefix  = "vineyard"
	DefaultEtcdTimeout = 5 * time.Second
	DefaultLeaseTTL    = 10 * time.Second
)

// MaxInstances is how many instances may be registered at once: object ids
// carry 10 bits of the instance id (internal/ids), so live instances must
// differ in them.
const MaxInstances = 1024

// InstanceInfo is the registration of one instance, in upstream's shape
// (the fields of client.meta's entries).
type InstanceInfo struct {
	InstanceID   uint64 `json:"instance_id"`
	HostID       uint64 `json:"hostid"`
	Hostname     string `json:"hostname"`
	Nodename     string `json:"nodename"`
	IPCSocket    string `json:"ipc_socket"`
	RPCEndpoint  string `json:"rpc_endpoint"`
	PeerEndpoint string `json:"peer_endpoint"`
	Timestamp    int64  `json:"timestamp"` // registration time, Unix seconds
}

// Key layout under the prefix (docs/cluster.md describes it).
const (
	keyCounter   = "next_instance_id"
	keyInstances = "instances/"
	keyData      = "data/"
	keyNames     = "names/"
	// keyDeleted + id: the tombstone of an object deleted through an
	// instance that did not make it, for its owner (Etcd.Delete).
	keyDeleted = "deleted/"
)

// OpenEtcd connects to etcd, registers this instance under a fresh
// cluster-unique id and starts following the prefix. It fails within
// cfg.DialTimeout (plus ctx's own deadline, whichever is first), with an
// error wrapping ErrEtcd that names the endpoints, when etcd cannot be
// reached. The caller MUST call Close.
func OpenEtcd(ctx context.Context, cfg EtcdConfig) (*Etcd, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, fmt.Errorf("%w: no endpoint given", ErrEtcd)
	}
	if cfg.Prefix == "" {
		cfg.Prefix = DefaultEtcdPrefix
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultEtcdTimeout
	}
	if cfg.LeaseTTL <= 0 {
		cfg.LeaseTTL = DefaultLeaseTTL
	}
	if cfg.Hostname == "" {
		cfg.Hostname, _ = os.Hostname()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	e := &Etcd{}
	em, metricOpts := newEtcdMetrics(cfg.Metrics, e)
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            cfg.Endpoints,
		DialTimeout:          cfg.DialTimeout,
		DialKeepAliveTime:    cfg.DialTimeout,
		DialKeepAliveTimeout: cfg.DialTimeout,
		Logger:               zap.NewNop(),
		TLS:                  cfg.TLS,
		Username:             cfg.Username,
		Password:             cfg.Password,
		// Reconnect within a second of etcd coming back (gRPC's default
		// backoff grows to two minutes).
		DialOptions: append([]grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: cfg.DialTimeout,
		})}, metricOpts...),
	})
	if err != nil {
		return nil, fmt.Errorf("%w at %s: %w", ErrEtcd, strings.Join(cfg.Endpoints, ","), err)
	}
	bg, cancel := context.WithCancel(context.Background())
	*e = Etcd{
		em:       em,
		cfg:      cfg,
		root:     strings.TrimSuffix(cfg.Prefix, "/") + "/",
		cli:      cli,
		changes:  make(chan Change),
		ctx:      bg,
		cancel:   cancel,
		remote:   make(map[ids.ObjectID]struct{}),
		names:    make(map[string]ids.ObjectID),
		ownTrees: make(map[ids.ObjectID][]byte),
		ownNames: make(map[string]ids.ObjectID),
		out:      make(map[string]*outOp),
		outKick:  make(chan struct{}, 1),
	}
	if err := e.register(ctx); err != nil {
		cancel()
		_ = cli.Close()
		return nil, err
	}
	e.wg.Add(3)
	go e.keepAlive()
	go e.follow()
	go e.reconcile()
	return e, nil
}

// fail wraps an etcd error with the endpoints and what was being done.
func (e *Etcd) fail(what string, err error) error {
	return fmt.Errorf("%w at %s: %s: %w", ErrEtcd, strings.Join(e.cfg.Endpoints, ","), what, err)
}

// opCtx returns a context for one call to etcd, bounded by DialTimeout.
func (e *Etcd) opCtx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, e.cfg.DialTimeout)
}

// currentLease returns the lease new keys are attached to, or an error at
// once when the backend is closed or etcd is known to be unreachable: the
// connection is in transient failure (gRPC is between reconnection
// attempts), so a call would only wait for its timeout. This keeps the
// store, which calls the backend under its lock, from stalling while etcd
// is down.
func (e *Etcd) currentLease() (clientv3.LeaseID, error) {
	e.mu.Lock()
	closed, lease := e.closed, e.lease
	e.mu.Unlock()
	if closed {
		return 0, ErrClosed
	}
	if st := e.cli.ActiveConnection().GetState(); st == connectivity.TransientFailure {
		e.em.unreachable()
		return 0, e.fail("connect", errors.New("etcd is unreachable"))
	}
	return lease, nil
}

// Healthy returns nil while this instance is part of the cluster: its
// lease is held and etcd is not known to be unreachable; otherwise an
// error saying which (a readiness probe's answer).
func (e *Etcd) Healthy() error {
	if e.leaseLost.Load() {
		return e.fail("lease", errors.New("this instance's lease is lost; registering again"))
	}
	if st := e.cli.ActiveConnection().GetState(); st == connectivity.TransientFailure {
		return e.fail("connect", errors.New("etcd is unreachable"))
	}
	return nil
}

// register grants a lease and allocates the instance id: it reads the
// counter, skips ids whose low 10 bits a live instance uses, and in one
// transaction that compares the counter's revision advances the counter and
// writes the registration. A concurrent registration makes the compare fail
// and the loop read again; nothing is locked.
func (e *Etcd) register(ctx context.Context) error {
	octx, cancel := e.opCtx(ctx)
	ttl := int64((e.cfg.LeaseTTL + time.Second - 1) / time.Second)
	grant, err := e.cli.Grant(octx, ttl)
	cancel()
	if err != nil {
		return e.fail("grant a lease (is etcd running?)", err)
	}
	e.lease = grant.ID
	for {
		// Each attempt has its own bound: attempts lost to concurrent
		// registrations are retried, an unreachable etcd failed above.
		if err := e.registerOnce(ctx); !errors.Is(err, errRetry) {
			return err
		}
	}
}

// errRetry says a registration lost its compare to a concurrent one.
var errRetry = errors.New("retry")

// registerOnce is one attempt of register.
func (e *Etcd) registerOnce(ctx context.Context) error {
	octx, cancel := e.opCtx(ctx)
	defer cancel()
	counter, err := e.cli.Get(octx, e.root+keyCounter)
	if err != nil {
		return e.fail("read the instance counter", err)
	}
	var next uint64
	var rev int64
	if len(counter.Kvs) > 0 {
		rev = counter.Kvs[0].ModRevision
		if next, err = strconv.ParseUint(string(counter.Kvs[0].Value), 10, 64); err != nil {
			return e.fail("read the instance counter", fmt.Errorf("bad value %q", counter.Kvs[0].Value))
		}
	}
	live, err := e.cli.Get(octx, e.root+keyInstances, clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return e.fail("list instances", err)
	}
	used := make(map[uint64]bool, len(live.Kvs))
	for _, kv := range live.Kvs {
		if n, ok := parseInstanceKey(e.root, string(kv.Key)); ok {
			used[n%MaxInstances] = true
		}
	}
	if len(used) >= MaxInstances {
		return e.fail("register", fmt.Errorf("%d instances are live already, at most %d", len(used), MaxInstances))
	}
	id := next
	for used[id%MaxInstances] {
		id++
	}
	e.instance = id
	e.info = e.registration()
	key := e.instanceKey()
	resp, err := e.cli.Txn(octx).If(
		clientv3.Compare(clientv3.ModRevision(e.root+keyCounter), "=", rev),
		clientv3.Compare(clientv3.CreateRevision(key), "=", 0),
	).Then(
		clientv3.OpPut(e.root+keyCounter, strconv.FormatUint(id+1, 10)),
		clientv3.OpPut(key, string(e.info), clientv3.WithLease(e.lease)),
	).Commit()
	if err != nil {
		return e.fail("register the instance", err)
	}
	if resp.Succeeded {
		return nil
	}
	return errRetry
}

func (e *Etcd) instanceKey() string {
	return e.root + keyInstances + "i" + strconv.FormatUint(e.instance, 10)
}

func parseInstanceKey(root, key string) (uint64, bool) {
	rest, ok := strings.CutPrefix(key, root+keyInstances+"i")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(rest, 10, 64)
	return n, err == nil
}

// registration returns the JSON published for this instance.
func (e *Etcd) registration() []byte {
	h := fnv.New64a()
	_, _ = h.Write([]byte(e.cfg.Hostname))
	b, _ := json.Marshal(InstanceInfo{
		InstanceID:   e.instance,
		HostID:       h.Sum64() >> 1, // fits a signed integer, for JSON readers that parse int64
		Hostname:     e.cfg.Hostname,
		Nodename:     e.cfg.Hostname,
		IPCSocket:    e.cfg.IPCSocket,
		RPCEndpoint:  e.cfg.RPCEndpoint,
		PeerEndpoint: e.cfg.PeerEndpoint,
		Timestamp:    time.Now().Unix(),
	})
	return b
}

// keepAlive keeps the lease alive. When the lease is lost (etcd was
// unreachable for longer than its TTL, or it expired) it re-registers under
// the same instance id with a new lease, retrying until Close.
func (e *Etcd) keepAlive() {
	defer e.wg.Done()
	for e.ctx.Err() == nil {
		e.mu.Lock()
		lease := e.lease
		e.mu.Unlock()
		if ch, err := e.cli.KeepAlive(e.ctx, lease); err == nil {
			for range ch { // drain: the channel closes when the lease is lost
			}
		}
		if e.ctx.Err() != nil {
			return
		}
		e.cfg.Logger.Warn("etcd lease lost: registering again; other instances miss this one's objects meanwhile",
			"instance", e.instance, "lease", int64(lease))
		e.leaseLost.Store(true)
		for e.ctx.Err() == nil {
			if err := e.reregister(); err == nil {
				e.leaseLost.Store(false)
				e.mu.Lock()
				now := e.lease
				e.mu.Unlock()
				e.cfg.Logger.Info("registered in etcd again", "instance", e.instance, "lease", int64(now),
					"new_lease", now != lease)
				break
			}
			select {
			case <-e.ctx.Done():
			case <-time.After(500 * time.Millisecond):
			}
		}
	}
}

// reregister keeps the lease if it survived, or grants a new one, writes
// the registration again under the same instance id, and publishes again
// the trees and names this instance had written (etcd deleted them with the
// old lease, and the other instances dropped them).
func (e *Etcd) reregister() error {
	ctx, cancel := e.opCtx(e.ctx)
	defer cancel()
	e.mu.Lock()
	lease, republish := e.lease, e.republish
	e.mu.Unlock()
	if _, err := e.cli.KeepAliveOnce(ctx, lease); err == nil {
		if republish {
			return e.publishOwn(lease)
		}
		return nil // the lease survived the outage
	} else if !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		return err
	}
	ttl := int64((e.cfg.LeaseTTL + time.Second - 1) / time.Second)
	grant, err := e.cli.Grant(ctx, ttl)
	if err != nil {
		return err
	}
	key := e.instanceKey()
	resp, err := e.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, string(e.info), clientv3.WithLease(grant.ID))).Commit()
	if err != nil {
		return err
	}
	if !resp.Succeeded {
		_, _ = e.cli.Revoke(ctx, grant.ID)
		return fmt.Errorf("instance id %d was taken by another instance", e.instance)
	}
	e.mu.Lock()
	e.lease = grant.ID
	e.republish = true
	e.mu.Unlock()
	return e.publishOwn(grant.ID)
}

// publishOwn writes this instance's trees and names again under lease. A
// name another instance took meanwhile stays theirs. It holds outMu: a
// change queued meanwhile is written after it (ownTrees already has it).
func (e *Etcd) publishOwn(lease clientv3.LeaseID) error {
	e.outMu.Lock()
	defer e.outMu.Unlock()
	e.mu.Lock()
	ops := make([]clientv3.Op, 0, len(e.ownTrees))
	sizes := make([]int, 0, len(e.ownTrees))
	for id, content := range e.ownTrees {
		key := e.dataKey(id)
		ops = append(ops, clientv3.OpPut(key, string(content), clientv3.WithLease(lease)))
		sizes = append(sizes, len(key)+len(content))
	}
	names := make(map[string]ids.ObjectID, len(e.ownNames))
	maps.Copy(names, e.ownNames)
	e.mu.Unlock()
	for _, n := range chunks(sizes) {
		if err := e.commit(ops[:n], "publish again"); err != nil {
			return err
		}
		ops = ops[n:]
	}
	for name, id := range names {
		ctx, cancel := e.opCtx(e.ctx)
		key := e.nameKey(name)
		_, err := e.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
			Then(clientv3.OpPut(key, id.String(), clientv3.WithLease(lease))).Commit()
		cancel()
		if err != nil {
			return e.fail("publish names again", err)
		}
	}
	e.mu.Lock()
	e.republish = false
	e.mu.Unlock()
	return nil
}

// InstanceID returns the cluster-unique id allocated at Open.
func (e *Etcd) InstanceID() uint64 { return e.instance }

// Instances returns the registration of every live instance, by id.
func (e *Etcd) Instances(ctx context.Context) (map[uint64]InstanceInfo, error) {
	if _, err := e.currentLease(); err != nil {
		return nil, err
	}
	octx, cancel := e.opCtx(ctx)
	defer cancel()
	resp, err := e.cli.Get(octx, e.root+keyInstances, clientv3.WithPrefix())
	if err != nil {
		return nil, e.fail("list instances", err)
	}
	out := make(map[uint64]InstanceInfo, len(resp.Kvs))
	for _, kv := range resp.Kvs {
		n, ok := parseInstanceKey(e.root, string(kv.Key))
		if !ok {
			continue
		}
		var info InstanceInfo
		if json.Unmarshal(kv.Value, &info) != nil {
			continue
		}
		info.InstanceID = n
		out[n] = info
	}
	return out, nil
}

// Close stops following etcd, revokes the lease (so the instance and its
// objects disappear from the cluster at once instead of after the TTL) and
// closes Changes. It is idempotent.
func (e *Etcd) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	lease := e.lease
	e.mu.Unlock()
	e.cancel()
	e.wg.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.DialTimeout)
	defer cancel()
	_, _ = e.cli.Revoke(ctx, lease) // best effort: otherwise the lease expires
	return e.cli.Close()
}
