package peer

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/v6d-io/v6d-go/internal/ids"
	"github.com/v6d-io/v6d-go/internal/sockcred/othertest"
)

func TestListenRefusesUnauthenticatedNetwork(t *testing.T) {
	src := newFakeSource()
	for _, addr := range []string{"0.0.0.0:0", ":0", "[::]:0"} {
		if _, err := Listen(ServerConfig{Addr: addr}, src); !errors.Is(err, ErrInsecure) {
			t.Errorf("%s: err = %v, want ErrInsecure", addr, err)
		}
	}
	for _, addr := range []string{"127.0.0.1:0", "localhost:0"} {
		s, err := Listen(ServerConfig{Addr: addr}, src)
		if err != nil {
			t.Errorf("%s: %v", addr, err)
			continue
		}
		_ = s.Close()
	}
	// With a secret the wildcard address is allowed.
	s, err := Listen(ServerConfig{Addr: "0.0.0.0:0", Secret: "x"}, src)
	if err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
}

func TestSharedSecret(t *testing.T) {
	src, sink := newFakeSource(), newFakeSink()
	src.put(blobID(0), []byte("secret bytes"))
	s := startServer(t, ServerConfig{Secret: "correct horse"}, src, nil)
	req := []ids.ObjectID{blobID(0)}
	for name, secret := range map[string]string{"none": "", "wrong": "correct hors", "longer": "correct horse!"} {
		c := newClient(t, ClientConfig{Secret: secret}, sink)
		if _, err := c.Fetch(fetchCtx(t), s.Addr(), req); !errors.Is(err, ErrUnauthenticated) {
			t.Errorf("%s: err = %v, want ErrUnauthenticated", name, err)
		}
	}
	if n := src.total.Load(); n != 0 {
		t.Fatalf("an unauthenticated peer got %d pins", n)
	}
	checkClean(t, src, sink)
	c := newClient(t, ClientConfig{Secret: "correct horse"}, sink)
	got, err := c.Fetch(fetchCtx(t), s.Addr(), req)
	if err != nil || string(sink.get(got[0].ID)) != "secret bytes" {
		t.Fatalf("right secret: %v", err)
	}
	// A large blob goes over a raw data connection, whose ticket only an
	// authenticated stream gets.
	big := pattern(4, 8<<20)
	src.put(blobID(1), big)
	got, err = c.Fetch(fetchCtx(t), s.Addr(), []ids.ObjectID{blobID(1)})
	if err != nil || !bytes.Equal(sink.get(got[0].ID), big) {
		t.Fatalf("right secret, large blob: %v", err)
	}
	if s.rawServed.Load() == 0 {
		t.Fatal("the large blob did not use a raw data connection")
	}
	checkClean(t, src, sink)
}

// TestRawUnknownTicket: a raw data connection with a ticket no stream
// handed out (guessed, or used already) is closed without a byte, and the
// port still serves gRPC afterwards.
func TestRawUnknownTicket(t *testing.T) {
	src, sink := newFakeSource(), newFakeSink()
	want := pattern(6, 4<<20)
	src.put(blobID(0), want)
	s := startServer(t, ServerConfig{Secret: "s"}, src, nil)
	for _, hello := range [][]byte{
		append([]byte(rawMagic), make([]byte, ticketLen)...),
		[]byte(rawMagic + "short"),
		[]byte("GET / HTTP/1.1\r\n\r\n"),
	} {
		conn, err := net.Dial("tcp", s.Addr())
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(sniffTimeout + 5*time.Second))
		// The first bytes in two pieces: the listener waits for all 8.
		if _, err := conn.Write(hello[:3]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond)
		if _, err := conn.Write(hello[3:]); err != nil {
			t.Fatal(err)
		}
		if tcp, ok := conn.(*net.TCPConn); ok {
			_ = tcp.CloseWrite()
		}
		n, err := io.Copy(io.Discard, conn)
		if err != nil && !errors.Is(err, syscall.ECONNRESET) {
			t.Fatalf("%q: %v", hello, err)
		}
		if n != 0 && bytes.HasPrefix(hello, []byte(rawMagic)) {
			t.Fatalf("%q: got %d bytes", hello, n)
		}
		_ = conn.Close()
	}
	if n := src.total.Load(); n != 0 {
		t.Fatalf("raw connections got %d pins", n)
	}
	// A ticket is good once: a second claim finds nothing.
	var r rawClaims
	tk, conns, done, err := r.expect()
	if err != nil {
		t.Fatal(err)
	}
	a1, b1 := net.Pipe()
	a2, b2 := net.Pipe()
	defer func() { _, _, _ = b1.Close(), a2.Close(), b2.Close() }()
	r.claim(tk, a1)
	r.claim(tk, a2)
	if c := <-conns; c != a1 {
		t.Fatal("first claim lost")
	}
	if _, err := b2.Read(make([]byte, 1)); !errors.Is(err, io.EOF) {
		t.Fatalf("second claim: %v, want its connection closed", err)
	}
	done()
	c := newClient(t, ClientConfig{Secret: "s"}, sink)
	got, err := c.Fetch(fetchCtx(t), s.Addr(), []ids.ObjectID{blobID(0)})
	if err != nil || !bytes.Equal(sink.get(got[0].ID), want) {
		t.Fatalf("fetch after bad raw connections: %v", err)
	}
	checkClean(t, src, sink)
}

// pki writes a CA, a server certificate for 127.0.0.1 and a client
// certificate, all signed by the CA, to dir.
type pki struct{ ca, serverCert, serverKey, clientCert, clientKey string }

func newPKI(t *testing.T, dir, name string) pki {
	t.Helper()
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name + " CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	write := func(file, typ string, der []byte) string {
		p := filepath.Join(dir, name+"-"+file)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	leaf := func(serial int64, usage x509.ExtKeyUsage) (string, string) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)},
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, _ := x509.MarshalECPrivateKey(key)
		n := big.NewInt(serial).String()
		return write(n+".crt", "CERTIFICATE", der), write(n+".key", "EC PRIVATE KEY", kder)
	}
	p := pki{ca: write("ca.crt", "CERTIFICATE", caDER)}
	p.serverCert, p.serverKey = leaf(2, x509.ExtKeyUsageServerAuth)
	p.clientCert, p.clientKey = leaf(3, x509.ExtKeyUsageClientAuth)
	return p
}

func TestMutualTLS(t *testing.T) {
	dir := t.TempDir()
	good, other := newPKI(t, dir, "good"), newPKI(t, dir, "other")
	src, sink := newFakeSource(), newFakeSink()
	src.put(blobID(0), []byte("over tls"))
	s := startServer(t, ServerConfig{TLS: TLSFiles{Cert: good.serverCert, Key: good.serverKey, CA: good.ca}}, src, nil)
	req := []ids.ObjectID{blobID(0)}
	for name, cfg := range map[string]ClientConfig{
		"plaintext":          {},
		"no client cert":     {TLS: TLSFiles{CA: good.ca}},
		"cert of another CA": {TLS: TLSFiles{CA: good.ca, Cert: other.clientCert, Key: other.clientKey}},
		"server not trusted": {TLS: TLSFiles{CA: other.ca, Cert: good.clientCert, Key: good.clientKey}},
	} {
		cfg.IdleTimeout = 5 * time.Second
		c := newClient(t, cfg, sink)
		if _, err := c.Fetch(fetchCtx(t), s.Addr(), req); err == nil {
			t.Errorf("%s: fetch succeeded", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	if n := src.total.Load(); n != 0 {
		t.Fatalf("an unauthenticated peer got %d pins", n)
	}
	checkClean(t, src, sink)
	c := newClient(t, ClientConfig{TLS: TLSFiles{CA: good.ca, Cert: good.clientCert, Key: good.clientKey}}, sink)
	got, err := c.Fetch(fetchCtx(t), s.Addr(), req)
	if err != nil || string(sink.get(got[0].ID)) != "over tls" {
		t.Fatalf("good client: %v", err)
	}
	// With TLS every byte stays inside the TLS connection: no raw path.
	big := pattern(5, 8<<20)
	src.put(blobID(1), big)
	got, err = c.Fetch(fetchCtx(t), s.Addr(), []ids.ObjectID{blobID(1)})
	if err != nil || !bytes.Equal(sink.get(got[0].ID), big) {
		t.Fatalf("good client, large blob: %v", err)
	}
	if n := s.rawServed.Load(); n != 0 {
		t.Fatalf("%d streams left TLS for raw data connections", n)
	}
	checkClean(t, src, sink)
	// TLS with client certificates also allows a non-loopback address.
	s2, err := Listen(ServerConfig{Addr: "0.0.0.0:0", TLS: TLSFiles{Cert: good.serverCert, Key: good.serverKey, CA: good.ca}}, src)
	if err != nil {
		t.Fatal(err)
	}
	_ = s2.Close()
	// Bad files are clear errors.
	if _, err := NewServer(ServerConfig{TLS: TLSFiles{Cert: good.serverCert, Key: good.serverKey, CA: good.serverKey}}, src); err == nil {
		t.Error("a key as CA: no error")
	}
	if _, err := NewClient(ClientConfig{TLS: TLSFiles{CA: filepath.Join(dir, "missing")}}, sink); err == nil {
		t.Error("missing CA file: no error")
	}
}

func init() {
	// As another user: fetch blobID(0) from the server at args[0] with no
	// secret; print the outcome.
	othertest.Register("peer-fetch", func(args []string) error {
		sink := newFakeSink()
		c, err := NewClient(ClientConfig{}, sink)
		if err != nil {
			return err
		}
		defer c.Close()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		got, err := c.Fetch(ctx, args[0], []ids.ObjectID{blobID(0)})
		if err != nil {
			fmt.Println("fetch:", err)
			return nil
		}
		fmt.Printf("fetched %q\n", sink.get(got[0].ID))
		return nil
	})
}

// TestOtherUserRefused: without a secret or TLS CA, the peer service serves
// daemons of its own user (no configuration) and refuses any other local
// user, before anything is pinned.
func TestOtherUserRefused(t *testing.T) {
	othertest.Need(t)
	src, sink := newFakeSource(), newFakeSink()
	src.put(blobID(0), []byte("never persisted"))
	s := startServer(t, ServerConfig{}, src, nil)
	got, err := newClient(t, ClientConfig{}, sink).Fetch(fetchCtx(t), s.Addr(), []ids.ObjectID{blobID(0)})
	if err != nil || string(sink.get(got[0].ID)) != "never persisted" {
		t.Fatalf("same user: %v", err)
	}
	pins := src.total.Load()
	out, err := othertest.Run(t, "peer-fetch", s.Addr())
	t.Logf("uid %d: %s", othertest.UID, out)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "not authenticated") || !strings.Contains(string(out), "uid 1001") {
		t.Fatal("the other user was not refused")
	}
	if n := src.total.Load(); n != pins {
		t.Fatalf("the other user got %d pins", n-pins)
	}
}
