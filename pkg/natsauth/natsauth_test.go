package natsauth

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"
)

// Settings that do not fit together are refused when checked, not at the first connection.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Settings
		want string
	}{
		{"none", Settings{}, ""},
		{"creds", Settings{CredsFile: "relay.creds"}, ""},
		{"user and password", Settings{User: "relay", PasswordFile: "pw"}, ""},
		{"token", Settings{TokenFile: "token"}, ""},
		{"TLS CA and client certificate", Settings{TLSCAFile: "ca.pem", TLSCertFile: "c.pem", TLSKeyFile: "k.pem"}, ""},
		{"user without password", Settings{User: "relay"}, "password file"},
		{"password without user", Settings{PasswordFile: "pw"}, "password file"},
		{"creds and token", Settings{CredsFile: "relay.creds", TokenFile: "token"}, "one of"},
		{"certificate without key", Settings{TLSCertFile: "c.pem"}, "its key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.s.Check()
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
		})
	}
}

// The secrets are read from their files when the options are made; a missing file is an error that names it.
func TestOptionsReadTheSecretFiles(t *testing.T) {
	dir := t.TempDir()
	password := filepath.Join(dir, "password")
	require.NoError(t, os.WriteFile(password, []byte("s3cret\n"), 0o600))
	for _, tc := range []struct {
		name    string
		s       Settings
		options int
		wantErr string
	}{
		{"none", Settings{}, 0, ""},
		{"user and password", Settings{User: "relay", PasswordFile: password}, 1, ""},
		{"token", Settings{TokenFile: password}, 1, ""},
		{"CA: TLS", Settings{TLSCAFile: "ca.pem"}, 2, ""},
		{"client certificate: TLS", Settings{TLSCertFile: "c.pem", TLSKeyFile: "k.pem"}, 2, ""},
		{"missing password file", Settings{User: "relay", PasswordFile: filepath.Join(dir, "absent")}, 0, "absent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts, err := tc.s.Options()
			if tc.wantErr != "" {
				require.ErrorContains(t, err, tc.wantErr)
				return
			}
			require.NoError(t, err)
			require.Len(t, opts, tc.options)
		})
	}
}

// The flags carry the prefix they are added under.
func TestAddFlags(t *testing.T) {
	var s Settings
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	s.AddFlags(fs, "events-nats-", "the relay")
	require.NoError(t, fs.Parse([]string{"--events-nats-user", "relay", "--events-nats-password-file", "pw", "--events-nats-tls-ca", "ca.pem"}))
	require.Equal(t, Settings{User: "relay", PasswordFile: "pw", TLSCAFile: "ca.pem"}, s)
}
