// Package natsauth holds how a HyperFleet process authenticates to NATS and secures the connection. The API's relay
// of the change feed (--events-nats-*) and the adapters' JetStream source (--nats-*) read the same settings under
// their own flag prefixes, so a NATS that requires credentials and TLS serves both ends of the relay.
package natsauth

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/spf13/pflag"
)

// Settings are a connection's authentication and TLS. Authentication is one of: a credentials file (a user JWT and
// its NKey seed, as nsc writes it), a user and the file holding its password, or the file holding a token; none
// for a server without authentication (or with the user in the URL). The files are read at each connection, so a
// rotated secret is used from the next reconnect on. TLS is the CA bundle that verifies the server (default: the
// system's) and a client certificate and key for servers that verify clients; a tls:// URL, or any of these,
// makes the connection TLS.
type Settings struct {
	CredsFile, User, PasswordFile, TokenFile string
	TLSCAFile, TLSCertFile, TLSKeyFile       string
}

// AddFlags adds the settings' flags, each named prefix+name (e.g. prefix "nats-" gives --nats-creds); who says
// whose connection they configure, in the help.
func (s *Settings) AddFlags(fs *pflag.FlagSet, prefix, who string) {
	fs.StringVar(&s.CredsFile, prefix+"creds", s.CredsFile, "NATS credentials file (user JWT and NKey seed) for "+who)
	fs.StringVar(&s.User, prefix+"user", s.User, "NATS user for "+who+" (with --"+prefix+"password-file)")
	fs.StringVar(&s.PasswordFile, prefix+"password-file", s.PasswordFile, "file holding the NATS user's password")
	fs.StringVar(&s.TokenFile, prefix+"token-file", s.TokenFile, "file holding a NATS token for "+who)
	fs.StringVar(&s.TLSCAFile, prefix+"tls-ca", s.TLSCAFile, "PEM CA bundle that verifies the NATS server (makes the connection TLS; default: the system's CAs for tls:// URLs)")
	fs.StringVar(&s.TLSCertFile, prefix+"tls-cert", s.TLSCertFile, "PEM client certificate for a NATS server that verifies clients (with --"+prefix+"tls-key)")
	fs.StringVar(&s.TLSKeyFile, prefix+"tls-key", s.TLSKeyFile, "PEM private key of --"+prefix+"tls-cert")
}

// Check returns an error if the settings do not fit together, so that a process refuses them at start rather than
// at its first connection.
func (s Settings) Check() error {
	auths := 0
	for _, set := range []bool{s.CredsFile != "", s.User != "" || s.PasswordFile != "", s.TokenFile != ""} {
		if set {
			auths++
		}
	}
	switch {
	case auths > 1:
		return errors.New("NATS: give one of a credentials file, a user and password file, or a token file")
	case (s.User == "") != (s.PasswordFile == ""):
		return errors.New("NATS: a user needs its password file, and a password file its user")
	case (s.TLSCertFile == "") != (s.TLSKeyFile == ""):
		return errors.New("NATS: a TLS client certificate needs its key, and a key its certificate")
	}
	return nil
}

// Options are the connection's authentication and TLS options, the secrets read from their files now.
func (s Settings) Options() ([]nats.Option, error) {
	var opts []nats.Option
	read := func(file string) (string, error) {
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("NATS: %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	switch {
	case s.CredsFile != "":
		opts = append(opts, nats.UserCredentials(s.CredsFile))
	case s.User != "":
		password, err := read(s.PasswordFile)
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.UserInfo(s.User, password))
	case s.TokenFile != "":
		token, err := read(s.TokenFile)
		if err != nil {
			return nil, err
		}
		opts = append(opts, nats.Token(token))
	}
	if s.TLSCAFile != "" {
		opts = append(opts, nats.RootCAs(s.TLSCAFile))
	}
	if s.TLSCertFile != "" {
		opts = append(opts, nats.ClientCert(s.TLSCertFile, s.TLSKeyFile))
	}
	if s.TLSCAFile != "" || s.TLSCertFile != "" {
		opts = append(opts, nats.Secure())
	}
	return opts, nil
}
