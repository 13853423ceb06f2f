package server

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/v6d-io/v6d-go/internal/etcdtest"
	"github.com/v6d-io/v6d-go/internal/meta"
)

// throwawayPKI writes a CA, a server certificate for 127.0.0.1 and a client
// certificate, both signed by the CA, to dir and returns their paths.
type throwawayPKI struct{ ca, serverCert, serverKey, clientCert, clientKey string }

func newThrowawayPKI(t *testing.T, dir string) throwawayPKI {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "v6d test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	leaf := func(serial int64, name string, usage x509.ExtKeyUsage) (string, string) {
		key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		tmpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: name},
			NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
			KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{usage},
			IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"localhost"}}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
		if err != nil {
			t.Fatal(err)
		}
		kder, _ := x509.MarshalECPrivateKey(key)
		return write(name+".pem", "CERTIFICATE", der), write(name+"-key.pem", "EC PRIVATE KEY", kder)
	}
	p := throwawayPKI{ca: write("ca.pem", "CERTIFICATE", caDER)}
	p.serverCert, p.serverKey = leaf(2, "server", x509.ExtKeyUsageServerAuth)
	p.clientCert, p.clientKey = leaf(3, "client", x509.ExtKeyUsageClientAuth)
	return p
}

// TestEtcdTLSAndAuth: a daemon reaches an etcd that serves TLS, asks for
// client certificates and has authentication on, given the CA, its client
// certificate and a user's password (--etcd-cacert/-cert/-key, --etcd-user,
// --etcd-password-file); without any one of them it fails to start, saying
// why.
func TestEtcdTLSAndAuth(t *testing.T) {
	dir := t.TempDir()
	pki := newThrowawayPKI(t, dir)
	e, err := etcdtest.StartTLS(filepath.Join(dir, "etcd"), etcdtest.TLS{CertFile: pki.serverCert, KeyFile: pki.serverKey, CAFile: pki.ca})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	if !strings.HasPrefix(e.Endpoint(), "https://") {
		t.Fatalf("endpoint %s", e.Endpoint())
	}
	tlsCfg, err := meta.EtcdTLS(pki.ca, pki.clientCert, pki.clientKey)
	if err != nil {
		t.Fatal(err)
	}
	admin, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint()}, TLS: tlsCfg, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if _, err := admin.UserAdd(ctx, "root", "root-pw"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}

	cfg := func(mod func(c *Config)) Config {
		c := Config{Socket: filepath.Join(t.TempDir(), "s.sock"), Size: 4 << 20, Meta: "etcd",
			EtcdEndpoints: []string{e.Endpoint()}, EtcdPrefix: "tls-test", EtcdTimeout: 20 * time.Second,
			EtcdCACert: pki.ca, EtcdCert: pki.clientCert, EtcdKey: pki.clientKey,
			EtcdUser: "root", EtcdPassword: "root-pw"}
		if mod != nil {
			mod(&c)
		}
		return c
	}
	s, err := Start(cfg(nil))
	if err != nil {
		t.Fatalf("with CA, client certificate and password: %v", err)
	}
	if s.Store().InstanceID() == 0 && s.etcd == nil {
		t.Fatal("no etcd backend")
	}
	_ = s.Close()
	for name, mod := range map[string]func(c *Config){
		"no CA":          func(c *Config) { c.EtcdCACert = "" },
		"no certificate": func(c *Config) { c.EtcdCert, c.EtcdKey = "", "" },
		"wrong password": func(c *Config) { c.EtcdPassword = "nope" },
		"no user":        func(c *Config) { c.EtcdUser, c.EtcdPassword = "", "" },
		"plain http":     func(c *Config) { c.EtcdEndpoints = []string{strings.Replace(e.Endpoint(), "https", "http", 1)} },
	} {
		c := cfg(mod)
		c.EtcdTimeout = 3 * time.Second // each of these fails by timing out
		if s, err := Start(c); err == nil {
			_ = s.Close()
			t.Errorf("%s: started", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
	// Bad settings are refused before any connection.
	for name, mod := range map[string]func(c *Config){
		"cert without key":      func(c *Config) { c.EtcdKey = "" },
		"password without user": func(c *Config) { c.EtcdUser = "" },
	} {
		c := cfg(mod)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: valid", name)
		}
	}
	c := Config{Size: 1 << 20, EtcdCACert: pki.ca}
	if err := c.Validate(); err == nil {
		t.Error("etcd TLS with the local backend: valid")
	}
}
