package integration

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/server"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/natsauth"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

// writeCA writes a CA and a server certificate for 127.0.0.1 it signed into dir, returning the three files.
func writeCA(t *testing.T, dir string) (caFile, certFile, keyFile string) {
	t.Helper()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	ca := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign}
	caDER, err := x509.CreateCertificate(rand.Reader, ca, ca, &caKey.PublicKey, caKey)
	require.NoError(t, err)
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	require.NoError(t, err)
	leaf := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "nats"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, KeyUsage: x509.KeyUsageDigitalSignature}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	require.NoError(t, err)
	keyDER, err := x509.MarshalECPrivateKey(key)
	require.NoError(t, err)
	write := func(name, typ string, der []byte) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600))
		return path
	}
	return write("ca.pem", "CERTIFICATE", caDER), write("server.pem", "CERTIFICATE", leafDER), write("server-key.pem", "EC PRIVATE KEY", keyDER)
}

// startSecureNATS starts a NATS server of the test's own with JetStream, TLS and a user with a password, and
// returns its URL.
func startSecureNATS(t *testing.T, dir, certFile, keyFile, user, password string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := ln.Addr().(*net.TCPAddr).Port
	require.NoError(t, ln.Close())
	cmd := exec.Command("nats-server", "-a", "127.0.0.1", "-p", strconv.Itoa(port), "-js", "-sd", filepath.Join(dir, "js"),
		"--user", user, "--pass", password, "--tls", "--tlscert", certFile, "--tlskey", keyFile)
	var log bytes.Buffer
	cmd.Stderr = &log
	require.NoError(t, cmd.Start(), "nats-server (Debian's nats-server package) must be installed")
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("nats-server:\n%s", log.String())
		}
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	require.Eventually(t, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
		}
		return err == nil
	}, 10*time.Second, 20*time.Millisecond, "nats-server listens")
	return "tls://" + addr
}

// The relay authenticates (a user and a password file) and verifies the server with a CA file over TLS, and
// publishes the feed to a server that requires both; an adapter's NATS source, given the same settings, consumes it.
func TestRelayWithCredentialsAndTLS(t *testing.T) {
	dir := t.TempDir()
	caFile, certFile, keyFile := writeCA(t, dir)
	url := startSecureNATS(t, dir, certFile, keyFile, "relay", "s3cret")
	passwordFile := filepath.Join(dir, "password")
	require.NoError(t, os.WriteFile(passwordFile, []byte("s3cret\n"), 0o600))

	auth := natsauth.Settings{User: "relay", PasswordFile: passwordFile, TLSCAFile: caFile}
	s := startServerOn(t, harness.NewDatabase(t), server.Config{RequiredAdapters: map[string][]string{"cluster": {"applier"}, "versionstream": {testAdapter}},
		EventsNATSURL: url, EventsNATSStream: "HFTLS", EventsNATSSubjectPrefix: "hftls",
		EventsNATSAuth: auth})
	createCluster(t, s, "relayed", nil)
	head := eventHead(t, s.dsn)

	nc, err := nats.Connect(url, nats.UserInfo("relay", "s3cret"), nats.RootCAs(caFile), nats.Timeout(5*time.Second))
	require.NoError(t, err)
	defer nc.Close()
	js, err := jetstream.New(nc)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return relayedThrough(js, "HFTLS", head) }, 20*time.Second, 50*time.Millisecond,
		"the relay publishes through TLS with its credentials")

	_, err = nats.Connect(url, nats.RootCAs(caFile), nats.Timeout(5*time.Second))
	require.Error(t, err, "the server refuses a client without the credentials, so the relay's were used")
	_, err = nats.Connect(url, nats.UserInfo("relay", "s3cret"), nats.Timeout(5*time.Second))
	require.Error(t, err, "the server's certificate is not the system's: the relay's CA file was used")

	rec := newTally()
	runner := startRuntime(t, s, rec, noPoll, func(c *adapter.Config) {
		c.Source, c.NATSURL, c.NATSStream, c.NATSSubjectPrefix, c.NATSAuth = adapter.SourceNATS, url, "HFTLS", "hftls", auth
	})
	eventually(t, "the default stream reconciled by the first poll", func() bool { return rec.count(defaultStream) == 1 })
	eventually(t, "the adapter's consumer", func() bool {
		_, err := js.Consumer(ctxFor(t), "HFTLS", adapter.ConsumerName(testAdapter, adapter.VersionStreams(), 0, 1))
		return err == nil
	})
	relayed := createStream(t, s, "told-through-tls", api.VersionStreamSpec{TargetVersion: "4.16"})
	eventually(t, "the stream reconciled from the secured stream", func() bool { return reportedAt(t, s, *relayed, 1) })
	require.GreaterOrEqual(t, metricValue(t, runner, series("hyperfleet_adapter_events_received_total", "kind=VersionStream", "source=nats", "type=created")), 1.0)
}
