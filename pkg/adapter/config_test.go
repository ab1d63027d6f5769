package adapter

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestOpsListenerIsOnLoopbackOutsideProduction(t *testing.T) {
	tests := []struct {
		env  string
		want string
	}{
		{"", "127.0.0.1:8091"},
		{"development", "127.0.0.1:8091"},
		{"integration_testing", "127.0.0.1:8091"},
		{"production", ":8091"},
	}
	for _, tt := range tests {
		t.Run("HYPERFLEET_ENV="+tt.env, func(t *testing.T) {
			t.Setenv("HYPERFLEET_ENV", tt.env)
			require.Equal(t, tt.want, DefaultOpsBindAddress("8091"))
		})
	}
}
