package eventrelay

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// The relay's authentication and TLS options are checked when it is built, not at its first connection.
func TestConfigCheck(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string
	}{
		{"none", Config{}, ""},
		{"creds", Config{CredsFile: "relay.creds"}, ""},
		{"user and password", Config{User: "relay", PasswordFile: "pw"}, ""},
		{"token", Config{TokenFile: "token"}, ""},
		{"TLS CA and client certificate", Config{TLSCAFile: "ca.pem", TLSCertFile: "c.pem", TLSKeyFile: "k.pem"}, ""},
		{"user without password", Config{User: "relay"}, "password file"},
		{"password without user", Config{PasswordFile: "pw"}, "password file"},
		{"creds and token", Config{CredsFile: "relay.creds", TokenFile: "token"}, "one of"},
		{"certificate without key", Config{TLSCertFile: "c.pem"}, "its key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Check()
			if tc.want == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tc.want)
		})
	}
}
