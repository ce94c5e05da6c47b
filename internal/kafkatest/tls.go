package kafkatest

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

// The users of the SASL_SSL listener, for PLAIN and for both SCRAM
// mechanisms (the SCRAM credentials are written at format time).
// SuperUser is a super user of StandardAuthorizer; User has no ACLs until a
// test grants some.
const (
	SuperUser     = "admin"
	SuperPassword = "admin-secret"
	User          = "alice"
	UserPassword  = "alice-secret"
)

// authority is the cluster's throwaway CA and the brokers' certificate,
// made in Go at Start (no keytool, no fixture files).
type authority struct {
	caPEM    []byte
	pool     *x509.CertPool
	storePEM []byte // PKCS#8 key and certificate: Kafka's PEM key store
}

func newAuthority() (*authority, error) {
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	caTmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{Organization: []string{"riffle kafkatest"}, CommonName: "kafkatest CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(30 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	leafTmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{Organization: []string{"riffle kafkatest"}, CommonName: "localhost"},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(30 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafTmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	pkcs8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(ca)
	store := pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pkcs8})
	store = append(store, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER})...)
	return &authority{
		caPEM:    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}),
		pool:     pool,
		storePEM: store,
	}, nil
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(fmt.Sprintf("kafkatest: crypto/rand: %v", err)) // does not fail on supported platforms
	}
	return n
}

// CACertPEM is the CA that signed the SASL_SSL listener's certificate; nil
// without Config.SASL.
func (c *Cluster) CACertPEM() []byte {
	if c.ca == nil {
		return nil
	}
	return c.ca.caPEM
}

// TLSConfig trusts the cluster's CA, for the SASL_SSL listener; nil
// without Config.SASL.
func (c *Cluster) TLSConfig() *tls.Config {
	if c.ca == nil {
		return nil
	}
	return &tls.Config{RootCAs: c.ca.pool.Clone(), MinVersion: tls.VersionTLS12}
}

// SASLAddrs are the SASL_SSL bootstrap addresses of every node; nil
// without Config.SASL.
func (c *Cluster) SASLAddrs() []string {
	if c.ca == nil {
		return nil
	}
	out := make([]string, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = n.SASLAddr
	}
	return out
}
