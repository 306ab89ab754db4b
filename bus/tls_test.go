package bus_test

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
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/ioa-nats/ioa/bus"
	"github.com/ioa-nats/ioa/bus/bustest"
)

// testCA makes a CA and a server certificate for 127.0.0.1 signed by it,
// and writes them as PEM files: ca.pem, server.pem, server-key.pem.
func testCA(t *testing.T) (ca, cert, key string) {
	t.Helper()
	dir := t.TempDir()
	write := func(name, typ string, der []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ioa test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	caCert, _ := x509.ParseCertificate(caDER)
	srvKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	srvTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "127.0.0.1"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	srvDER, err := x509.CreateCertificate(rand.Reader, srvTmpl, caCert, &srvKey.PublicKey, caKey)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, _ := x509.MarshalECPrivateKey(srvKey)
	return write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", srvDER), write("server-key.pem", "EC PRIVATE KEY", keyDER)
}

func TestTLSListener(t *testing.T) {
	ca, cert, key := testCA(t)
	dir := t.TempDir()
	b := bustest.New(t, func(c *bus.Config) {
		c.DataDir, c.Secure = dir, true
		c.TLS = bus.TLS{CertFile: cert, KeyFile: key}
	})
	creds := nats.UserCredentials(bus.AdminCredsFile(dir))

	// Verified against the CA: connects, and the runtime works through it.
	nc, err := nats.Connect(b.ClientURL(), creds, nats.RootCAs(ca))
	if err != nil {
		t.Fatalf("TLS with the CA: %v", err)
	}
	defer nc.Close()
	if !nc.TLSRequired() {
		t.Error("the server does not require TLS")
	}
	if _, err := nc.Request("$JS.API.INFO", nil, 5*time.Second); err != nil {
		t.Errorf("JetStream over TLS: %v", err)
	}
	// Without the CA the certificate is not trusted; in plain text the
	// server refuses.
	if nc, err := nats.Connect(b.ClientURL(), creds); err == nil {
		nc.Close()
		t.Error("connected without trusting the CA")
	}
	if nc, err := nats.Connect(b.ClientURL(), creds, nats.Secure(nil)); err == nil && !nc.TLSRequired() {
		nc.Close()
		t.Error("connected in plain text")
	}

	// A bus connecting as a client verifies the server with CAFile.
	cb, err := bus.Connect(t.Context(), bus.Config{NATSURL: b.ClientURL(), CredsFile: bus.AdminCredsFile(dir), TLS: bus.TLS{CAFile: ca}, NoProvision: true})
	if err != nil {
		t.Fatalf("bus.Connect over TLS: %v", err)
	}
	cb.Close()
}
