package kototest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/IBM/sarama"

	"github.com/koto-dev/watermill-koto/broker"
	"github.com/koto-dev/watermill-koto/broker/embedded"
)

// TLSConfigs returns a server configuration with a new self-signed
// certificate for 127.0.0.1 and localhost, and a client configuration that
// trusts that certificate alone. Nothing is written to disk.
func TLSConfigs(t testing.TB) (server, client *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("kototest: TLS key: %v", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		t.Fatalf("kototest: certificate serial: %v", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "kototest embedded broker"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true, // its own root
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("kototest: self-signed certificate: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("kototest: parse certificate: %v", err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(cert)
	server = &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: cert}},
		MinVersion:   tls.VersionTLS12,
	}
	return server, &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
}

// SecureBroker starts an embedded broker, closed when t finishes, that
// accepts only TLS connections authenticated as one SASL user with
// mechanism, and returns it with a broker.Config that connects to it with
// the right credentials.
func SecureBroker(t testing.TB, mechanism sarama.SASLMechanism, opts ...embedded.Option) (*embedded.Broker, broker.Config) {
	t.Helper()
	serverTLS, clientTLS := TLSConfigs(t)
	password := uniqueName(t, "secret", "")
	b := Embedded(t, append(opts, embedded.WithTLS(serverTLS), embedded.WithSASLUser(string(mechanism), "koto", password))...)
	return b, broker.Config{
		Brokers: b.Addrs(),
		SASL:    broker.SASLConfig{Mechanism: mechanism, User: "koto", Password: password},
		TLS:     clientTLS,
	}
}

// TLSFiles writes the certificate and private key of server, a configuration
// from [TLSConfigs], as PEM files in a directory removed when t finishes,
// for clients and commands that read them from disk. The certificate file
// is also the CA file that clients trust.
func TLSFiles(t testing.TB, server *tls.Config) (certFile, keyFile string) {
	t.Helper()
	cert := server.Certificates[0]
	key, err := x509.MarshalPKCS8PrivateKey(cert.PrivateKey)
	if err != nil {
		t.Fatalf("kototest: marshal TLS key: %v", err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "broker.crt"), filepath.Join(dir, "broker.key")
	for file, block := range map[string]*pem.Block{
		certFile: {Type: "CERTIFICATE", Bytes: cert.Certificate[0]},
		keyFile:  {Type: "PRIVATE KEY", Bytes: key},
	} {
		if err := os.WriteFile(file, pem.EncodeToMemory(block), 0o600); err != nil {
			t.Fatalf("kototest: write %s: %v", file, err)
		}
	}
	return certFile, keyFile
}
