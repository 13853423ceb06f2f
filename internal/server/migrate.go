package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/peer"
	"github.com/v6d-io/v6d-go/internal/peer/peerstore"
	"github.com/v6d-io/v6d-go/internal/protocol"
	"github.com/v6d-io/v6d-go/internal/status"
	"github.com/v6d-io/v6d-go/internal/store"
)

// MigrateTimeout bounds one migration (all its fetches and the copy of the
// tree); a stalled owner fails sooner, after peer.DefaultIdleTimeout.
const MigrateTimeout = 2 * time.Minute

// migrator runs the peer service of the daemon and its migrations
// (docs/cluster-data-plane.md, "Migration").
//
// Locking: mu guards copies, flights and endpoints; it is never held while
// calling the store or the peer client.
type migrator struct {
	st     *store.Store // set once by setStore, before any request is served
	stp    atomic.Pointer[store.Store]
	server *peer.Server // nil without Config.PeerEndpoint
	client *peer.Client
	m      *serverMetrics // counts the transfers

	mu      sync.Mutex
	copies  map[ids.ObjectID]ids.ObjectID // origin -> local copy
	flights map[ids.ObjectID]*flight      // migrations under way
	// endpoints remembers the peer endpoint each owner published, as read
	// from the backend (an etcd read costs ~10 client round trips), until a
	// fetch through it fails.
	endpoints map[uint64]string
}

// flight is one migration under way; the callers of the same object wait on
// done and share its result.
type flight struct {
	done chan struct{}
	id   ids.ObjectID
	err  error
}

// startMigrator starts the peer service on cfg.PeerEndpoint (none when
// empty) and the peer client migrations fetch with. It runs before the store
// exists, so that the etcd registration can publish the bound address; until
// setStore, the service refuses every fetch.
func startMigrator(cfg *Config, sm *serverMetrics) (*migrator, error) {
	m := &migrator{copies: map[ids.ObjectID]ids.ObjectID{}, flights: map[ids.ObjectID]*flight{},
		endpoints: map[uint64]string{}, m: sm}
	c, err := peer.NewClient(peer.ClientConfig{Secret: cfg.PeerSecret, TLS: cfg.PeerTLS}, peerstore.Sink{Store: m.store})
	if err != nil {
		return nil, fmt.Errorf("server: peer client: %w", err)
	}
	m.client = c
	if cfg.PeerEndpoint != "" {
		srv, err := peer.Listen(peer.ServerConfig{Addr: cfg.PeerEndpoint, Secret: cfg.PeerSecret, TLS: cfg.PeerTLS}, countingSource{peerstore.Source{Store: m.store}, sm})
		if err != nil {
			_ = c.Close()
			return nil, fmt.Errorf("server: peer service: %w", err)
		}
		m.server = srv
	}
	return m, nil
}

// setStore gives the migrator the daemon's store.
func (m *migrator) setStore(st *store.Store) {
	m.st = st
	m.stp.Store(st)
}

// store returns the daemon's store, or nil before setStore.
func (m *migrator) store() *store.Store { return m.stp.Load() }

// endpoint is the address the peer service listens on, or "".
func (m *migrator) endpoint() string {
	if m.server == nil {
		return ""
	}
	return m.server.Addr()
}

// PeerEndpoint returns the address the peer service listens on, or "".
func (s *Server) PeerEndpoint() string {
	return s.migr.endpoint()
}

// close stops the peer service (waiting for its streams, which release
// their pins) and the client; before the store closes.
func (m *migrator) close() {
	if m == nil {
		return
	}
	if m.server != nil {
		_ = m.server.Close()
	}
	_ = m.client.Close()
}

// Migrate returns the id of a local copy of id: id itself when it is local,
// the copy made earlier when there is one, otherwise a new persisted copy
// whose blobs are fetched from their owners. Concurrent migrations of one object share
// one transfer. On failure nothing of the copy remains.
func (s *Server) Migrate(ctx context.Context, id ids.ObjectID) (ids.ObjectID, error) {
	m := s.migr
	tree, blobs, local, err := m.st.MigrationSource(id)
	if status.CodeOf(err) == status.ObjectNotExists {
		// Not known (yet): catch up with the metadata backend once, as
		// get_meta does, then look again.
		if serr := m.st.Sync(ctx); serr != nil {
			return 0, serr
		}
		tree, blobs, local, err = m.st.MigrationSource(id)
	}
	if err != nil || local {
		return id, err
	}
	m.mu.Lock()
	if c, ok := m.copies[id]; ok {
		if m.st.Exists(c) {
			m.mu.Unlock()
			return c, nil
		}
		delete(m.copies, id) // the copy was deleted: make a new one
	}
	if f, ok := m.flights[id]; ok {
		m.mu.Unlock()
		select {
		case <-f.done:
			return f.id, f.err
		case <-ctx.Done():
			return 0, status.Errorf(status.Timeout, "migrate %v: %v", id, ctx.Err())
		}
	}
	f := &flight{done: make(chan struct{})}
	m.flights[id] = f
	m.mu.Unlock()

	f.id, f.err = m.migrate(ctx, tree, blobs)
	m.mu.Lock()
	delete(m.flights, id)
	if f.err == nil {
		m.copies[id] = f.id
	}
	m.mu.Unlock()
	close(f.done)
	if f.err != nil {
		// One status prefix for the client, not one per layer.
		e := status.AsError(f.err)
		return 0, &status.Error{Code: e.Code, Message: fmt.Sprintf("migrate %v: %s", id, e.Message)}
	}
	return f.id, nil
}

// migrate fetches blobs (grouped by owner) and stores the copy of tree.
func (m *migrator) migrate(ctx context.Context, tree []byte, blobs []store.RemoteBlob) (ids.ObjectID, error) {
	ctx, cancel := context.WithTimeout(ctx, MigrateTimeout)
	defer cancel()
	byOwner := map[uint64][]ids.ObjectID{}
	var owners []uint64
	for _, b := range blobs {
		if _, ok := byOwner[b.Instance]; !ok {
			owners = append(owners, b.Instance)
		}
		byOwner[b.Instance] = append(byOwner[b.Instance], b.ID)
	}
	copies := make(map[ids.ObjectID]ids.ObjectID, len(blobs))
	var made []ids.ObjectID
	fail := func(err error) (ids.ObjectID, error) {
		m.st.Delete(made, store.DeleteOptions{})
		return 0, err
	}
	for _, owner := range owners {
		got, err := m.fetch(ctx, owner, byOwner[owner])
		if err != nil {
			return fail(err)
		}
		for _, lb := range got {
			copies[lb.Source] = lb.ID
			if lb.ID != ids.EmptyBlob {
				made = append(made, lb.ID)
			}
		}
	}
	content, err := m.st.CopyTree(tree, copies)
	if err != nil {
		return fail(err)
	}
	ss := m.st.NewSession()
	created, err := ss.CreateData(content, nil)
	ss.Close()
	if err != nil {
		return fail(err)
	}
	// The origin is persisted (only those are known here), and so is its
	// copy, as upstream's: the other instances see it (docs/cluster-data-plane.md).
	if err := m.st.Persist(created.ID); err != nil {
		m.st.Delete([]ids.ObjectID{created.ID}, store.DeleteOptions{Deep: true})
		return fail(err)
	}
	return created.ID, nil
}

// fetch copies blobs from owner's peer service. It uses the endpoint read
// from the backend before, if any; when a fetch through that one fails, it
// reads the backend again and, if owner now publishes another endpoint (an
// instance id taken over by a new daemon), fetches once more from there.
func (m *migrator) fetch(ctx context.Context, owner uint64, blobs []ids.ObjectID) ([]peer.LocalBlob, error) {
	got, err := m.fetchFrom(ctx, owner, blobs)
	m.m.fetched(got, err)
	return got, err
}

// fetchFrom is fetch, uncounted.
func (m *migrator) fetchFrom(ctx context.Context, owner uint64, blobs []ids.ObjectID) ([]peer.LocalBlob, error) {
	m.mu.Lock()
	ep, known := m.endpoints[owner]
	m.mu.Unlock()
	if known {
		got, err := m.client.Fetch(ctx, ep, blobs)
		if err == nil {
			return got, nil
		}
		m.mu.Lock()
		if m.endpoints[owner] == ep {
			delete(m.endpoints, owner)
		}
		m.mu.Unlock()
		fresh, lerr := m.st.PeerEndpoint(ctx, owner)
		if lerr != nil || fresh == ep {
			return nil, fetchError(owner, err)
		}
		ep = fresh
	} else {
		var err error
		if ep, err = m.st.PeerEndpoint(ctx, owner); err != nil {
			return nil, err
		}
	}
	got, err := m.client.Fetch(ctx, ep, blobs)
	if err != nil {
		return nil, fetchError(owner, err)
	}
	m.mu.Lock()
	m.endpoints[owner] = ep
	m.mu.Unlock()
	return got, nil
}

// fetchError gives a failed fetch a status code for the client.
func fetchError(owner uint64, err error) error {
	if status.CodeOf(err) != status.UnknownError {
		return err // the sink's own (NotEnoughMemory)
	}
	code := status.IOError
	switch {
	case errors.Is(err, peer.ErrObjectNotExists):
		code = status.ObjectNotExists
	case errors.Is(err, peer.ErrUnavailable), errors.Is(err, peer.ErrStalled):
		code = status.ConnectionError
	case errors.Is(err, context.DeadlineExceeded):
		code = status.Timeout
	}
	return status.Errorf(code, "fetch from instance %d: %v", owner, err)
}

func init() {
	handlers[protocol.KindMigrateObject] = on(func(c *conn, r *protocol.MigrateObjectRequest) (protocol.Reply, []int, error) {
		id, err := c.s.Migrate(c.s.ctx, r.ObjectID)
		return &protocol.MigrateObjectReply{ObjectID: id}, nil, err
	})
}
