package server

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// writeSelfSigned writes a self-signed certificate for 127.0.0.1 named cn, and its key, and returns the paths.
func writeSelfSigned(tb testing.TB, dir, cn string) (certFile, keyFile string) {
	tb.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(tb, err)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	require.NoError(tb, err)
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	require.NoError(tb, err)
	certFile, keyFile = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	require.NoError(tb, os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600))
	require.NoError(tb, os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}), 0o600))
	return certFile, keyFile
}

func commonName(tb testing.TB, c *reloading[*tls.Certificate]) string {
	tb.Helper()
	leaf, err := x509.ParseCertificate(c.get().Certificate[0])
	require.NoError(tb, err)
	return leaf.Subject.CommonName
}

func TestCertificateReloadsWhenTheFileChanges(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile := writeSelfSigned(t, dir, "first")
	c, err := loadCertificate(certFile, keyFile, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	require.Equal(t, "first", commonName(t, c))

	writeSelfSigned(t, dir, "second")
	later := time.Now().Add(time.Minute)
	require.NoError(t, os.Chtimes(certFile, later, later))
	require.Equal(t, "second", commonName(t, c))

	// A certificate written before its key does not load; the pair is taken once the key follows.
	next := t.TempDir()
	nextCert, nextKey := writeSelfSigned(t, next, "third")
	copyFile := func(from, to string, at time.Time) {
		t.Helper()
		raw, err := os.ReadFile(from)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(to, raw, 0o600))
		require.NoError(t, os.Chtimes(to, at, at))
	}
	copyFile(nextCert, certFile, later.Add(time.Minute))
	require.Equal(t, "second", commonName(t, c), "a certificate without its key keeps the last good pair")
	copyFile(nextKey, keyFile, later.Add(2*time.Minute))
	require.Equal(t, "third", commonName(t, c))

	// While the files are being replaced the last good pair keeps being served.
	require.NoError(t, os.Remove(certFile))
	require.Equal(t, "third", commonName(t, c))

	_, err = loadCertificate(filepath.Join(dir, "absent.crt"), keyFile, slog.New(slog.DiscardHandler))
	require.Error(t, err)
}
