package redistest

import (
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
	"strconv"
	"testing"
	"time"

	"github.com/locklab/locklab/internal/tooling/redisproc"
)

// TLSServer is a redis-server that also listens for TLS on TLSAddr, with a
// certificate for 127.0.0.1 signed by a throwaway CA.
type TLSServer struct {
	*Server
	// TLSAddr is "127.0.0.1:port" of the TLS listener; Addr stays plain
	// TCP.
	TLSAddr string
	// CA trusts the server's certificate; OtherCA is a CA that did not
	// sign it.
	CA, OtherCA *x509.CertPool
	// CAFile is CA's certificate as a PEM file, for a client in another
	// process (SSL_CERT_FILE).
	CAFile string
}

// StartTLS starts a redis-server with a TLS port (clients need no
// certificate of their own) and stops it when the test ends.
func StartTLS(tb testing.TB) *TLSServer {
	tb.Helper()
	dir := tb.TempDir()
	caCert, caKey, caPEM := newCA(tb, "locklab test CA")
	_, _, otherPEM := newCA(tb, "locklab other CA")
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2),
		Subject:      pkix.Name{CommonName: "127.0.0.1"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1)},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &key.PublicKey, caKey)
	if err != nil {
		tb.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		tb.Fatal(err)
	}
	write := func(name string, typ string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			tb.Fatal(err)
		}
		return p
	}
	certFile := write("server.crt", "CERTIFICATE", der)
	keyFile := write("server.key", "EC PRIVATE KEY", keyDER)
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, caPEM, 0o600); err != nil {
		tb.Fatal(err)
	}
	port, err := redisproc.FreePort()
	if err != nil {
		tb.Fatal(err)
	}
	p, err := redisproc.Start(redisproc.Options{Args: []string{
		"--tls-port", strconv.Itoa(port),
		"--tls-cert-file", certFile,
		"--tls-key-file", keyFile,
		"--tls-ca-cert-file", caFile,
		"--tls-auth-clients", "no",
	}})
	if err != nil {
		tb.Fatalf("starting redis-server with TLS: %v", err)
	}
	s := &Server{Server: p, Pool: newPool(p.Addr)}
	tb.Cleanup(func() {
		s.Pool.Close()
		p.Stop()
	})
	out := &TLSServer{Server: s, TLSAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		CA: x509.NewCertPool(), OtherCA: x509.NewCertPool(), CAFile: caFile}
	out.CA.AppendCertsFromPEM(caPEM)
	out.OtherCA.AppendCertsFromPEM(otherPEM)
	return out
}

// newCA makes a self-signed CA certificate.
func newCA(tb testing.TB, name string) (*x509.Certificate, *ecdsa.PrivateKey, []byte) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		tb.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		tb.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		tb.Fatal(err)
	}
	return cert, key, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
}
