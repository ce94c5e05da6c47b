package rifftest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"time"
)

// authority is a throwaway CA that lives only in memory, so a TLS test needs
// no fixture files that expire or leak into the repository.
type authority struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
	pool    *x509.CertPool
}

// certLifetime is generous so a long-running CLI demo does not outlive its
// certificates; nothing is persisted, so there is no cost to it.
const certLifetime = 365 * 24 * time.Hour

func newAuthority() (*authority, error) {
	// P-256 keys generate in microseconds; RSA would add tens of
	// milliseconds to every TLS test for no benefit.
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("rifftest: generating CA key: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{Organization: []string{"rifftest"}, CommonName: "rifftest CA"},
		// Backdate a little so a client whose clock lags ours does not
		// see a certificate from the future.
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(certLifetime),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, fmt.Errorf("rifftest: creating CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("rifftest: parsing CA certificate: %w", err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return &authority{
		cert:    cert,
		key:     key,
		certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pool:    pool,
	}, nil
}

// serial returns a random serial number; RFC 5280 wants them unique per CA
// and random ones make that true without bookkeeping.
func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		// crypto/rand does not fail on supported platforms.
		panic(err)
	}
	return n
}

// issue signs a leaf certificate for the given use.
func (a *authority) issue(tmpl *x509.Certificate) (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("rifftest: generating key: %w", err)
	}
	now := time.Now()
	tmpl.SerialNumber = serial()
	tmpl.NotBefore = now.Add(-time.Hour)
	tmpl.NotAfter = now.Add(certLifetime)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, &key.PublicKey, a.key)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("rifftest: signing certificate: %w", err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("rifftest: parsing certificate: %w", err)
	}
	return tls.Certificate{
		// Sending the CA along is pointless: the peer must already
		// trust it, and the leaf alone is what real brokers send
		// when their CA is the trust anchor.
		Certificate: [][]byte{der},
		PrivateKey:  key,
		Leaf:        leaf,
	}, nil
}

// serverConfig returns the brokers' TLS config. The certificate names every
// way a test on this machine may spell the broker's host: kfake listens on
// 127.0.0.1, but clients given "localhost" must verify too.
func (a *authority) serverConfig(requireClient bool) (*tls.Config, error) {
	cert, err := a.issue(&x509.Certificate{
		Subject:     pkix.Name{Organization: []string{"rifftest"}, CommonName: "localhost"},
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	})
	if err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{cert},
		MinVersion:   tls.VersionTLS12,
	}
	if requireClient {
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
		cfg.ClientCAs = a.pool
	}
	return cfg, nil
}

func (a *authority) clientConfig() *tls.Config {
	return &tls.Config{
		// A copy, so a caller adding its own roots to the config it was
		// handed cannot make the brokers trust them for client certs.
		RootCAs:    a.pool.Clone(),
		MinVersion: tls.VersionTLS12,
	}
}

func (a *authority) clientCert(commonName string) (tls.Certificate, error) {
	return a.issue(&x509.Certificate{
		Subject:     pkix.Name{Organization: []string{"rifftest"}, CommonName: commonName},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}
