package server

import (
	"crypto/tls"
	"fmt"
	"log/slog"
)

// loadCertificate reads the key pair once, so that a bad file stops the server at start rather than at the first
// handshake, and again when either file changes, so rotated certificates (cert-manager, mounted secrets) take
// effect without a restart; while the files are being replaced the last good pair keeps being served.
func loadCertificate(certFile, keyFile string, log *slog.Logger) (*reloading[*tls.Certificate], error) {
	return newReloading("--https-cert-file", func() (*tls.Certificate, error) {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("https certificate %s / key %s: %w", certFile, keyFile, err)
		}
		return &pair, nil
	}, log, certFile, keyFile)
}

// tlsConfig serves cert as it is at each handshake.
func tlsConfig(cert *reloading[*tls.Certificate]) *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		return cert.get(), nil
	}}
}
