package server

import (
	"crypto/tls"
	"fmt"
	"os"
	"sync"
	"time"
)

// certificate serves a key pair from files and reloads it when the certificate file changes, so rotated
// certificates (cert-manager, mounted secrets) take effect without a restart.
type certificate struct {
	certFile, keyFile string

	mu       sync.Mutex
	modified time.Time
	pair     *tls.Certificate
}

// loadCertificate reads the pair once, so that a bad file stops the server at start rather than at the first
// handshake.
func loadCertificate(certFile, keyFile string) (*certificate, error) {
	c := &certificate{certFile: certFile, keyFile: keyFile}
	if _, err := c.get(nil); err != nil {
		return nil, err
	}
	return c, nil
}

func (c *certificate) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	info, err := os.Stat(c.certFile)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		if c.pair != nil {
			return c.pair, nil // keep serving the last good pair while the file is being replaced
		}
		return nil, fmt.Errorf("https certificate: %w", err)
	}
	if c.pair != nil && info.ModTime().Equal(c.modified) {
		return c.pair, nil
	}
	pair, err := tls.LoadX509KeyPair(c.certFile, c.keyFile)
	if err != nil {
		if c.pair != nil {
			return c.pair, nil
		}
		return nil, fmt.Errorf("https certificate %s / key %s: %w", c.certFile, c.keyFile, err)
	}
	c.pair, c.modified = &pair, info.ModTime()
	return c.pair, nil
}

func (c *certificate) config() *tls.Config {
	return &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: c.get}
}
