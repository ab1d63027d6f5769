package conditions

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAdapterAvailable(t *testing.T) {
	tests := []struct {
		adapter string
		want    string
	}{
		{"version-resolver", "VersionResolverAvailable"},
		{"hostedcluster-applier", "HostedclusterApplierAvailable"},
		{"dns_zone.sync", "DnsZoneSyncAvailable"},
		{"a", "AAvailable"},
		{"nodePool-scaler", "NodePoolScalerAvailable"},
		{"a--b", "ABAvailable"},
		{"-leading-trailing-", "LeadingTrailingAvailable"},
		{"v2-agent", "V2AgentAvailable"},
		{"ébène", "ÉbèneAvailable"},
	}
	for _, tt := range tests {
		t.Run(tt.adapter, func(t *testing.T) {
			require.Equal(t, tt.want, AdapterAvailable(tt.adapter))
		})
	}
}

func TestFindAndIsTrue(t *testing.T) {
	conds := []Condition{
		{Type: Available, Status: True},
		{Type: Finalized, Status: False},
		{Type: Finalized, Status: True}, // a repeat: the first of a type counts
	}
	tests := []struct {
		typ        string
		wantFound  bool
		wantStatus Status
		wantTrue   bool
	}{
		{Available, true, True, true},
		{Finalized, true, False, false},
		{Health, false, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.typ, func(t *testing.T) {
			got, found := Find(conds, tt.typ)
			require.Equal(t, tt.wantFound, found)
			require.Equal(t, tt.wantStatus, got.Status)
			require.Equal(t, tt.wantTrue, IsTrue(conds, tt.typ))
		})
	}
}

func TestStatusValid(t *testing.T) {
	for _, s := range []Status{True, False, Unknown} {
		require.True(t, s.Valid(), s)
	}
	for _, s := range []Status{"", "true", "Maybe"} {
		require.False(t, s.Valid(), s)
	}
}
