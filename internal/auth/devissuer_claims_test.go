package auth

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestDevIssuerMintsExtraClaims(t *testing.T) {
	d, err := LoadOrCreateDevIssuer(t.TempDir())
	require.NoError(t, err)
	v := newVerifier(t, VerifierConfig{JWKSFile: d.JWKSPath(), TenantClaim: "org_id"})
	tests := []struct {
		name    string
		extra   []map[string]any
		want    Identity
		wantErr string
	}{
		{name: "none", want: Identity{Subject: "alice", Roles: []Role{RoleUser}}},
		{name: "a tenant", extra: []map[string]any{{"org_id": "acme"}}, want: Identity{Subject: "alice", Roles: []Role{RoleUser}, Tenant: "acme"}},
		{name: "a claim Mint sets", extra: []map[string]any{{"sub": "mallory"}}, wantErr: `extra claim "sub" is one Mint sets`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			token, err := d.Mint("alice", []Role{RoleUser}, "", time.Hour, testIssuer, testAudience, tt.extra...)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			got, err := v.Verify(t.Context(), token)
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}
