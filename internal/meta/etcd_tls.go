package meta

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// EtcdTLS returns the TLS configuration of an etcd client: caFile (PEM)
// verifies etcd's certificate (the system's roots when empty), and
// certFile/keyFile, when given, are the client certificate etcd asks for
// with --client-cert-auth. Both or neither of certFile and keyFile.
func EtcdTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("%w: etcd CA: %w", ErrEtcd, err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: etcd CA %s holds no PEM certificate", ErrEtcd, caFile)
		}
		cfg.RootCAs = pool
	}
	if (certFile == "") != (keyFile == "") {
		return nil, fmt.Errorf("%w: an etcd client certificate needs both a certificate and a key file", ErrEtcd)
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("%w: etcd client certificate: %w", ErrEtcd, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
