package kinds

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/resource"
)

func TestVersionStreamTransition(t *testing.T) {
	tests := []struct {
		from, to string
		wantErr  string // empty: allowed
	}{
		{from: "4.16", to: "4.16"},
		{from: "4.16", to: "4.17"},
		{from: "4.9", to: "4.10"},
		{from: "4.16", to: "4.15", wantErr: "goes back from 4.16 to 4.15"},
		{from: "4.16", to: "4.9", wantErr: "goes back"},
		{from: "4.16", to: "4.18", wantErr: "skips minors from 4.16 to 4.18: the next is 4.17"},
		{from: "4.16", to: "5.0", wantErr: "changes the major version"},
		{from: "4.16", to: "3.17", wantErr: "changes the major version"},
	}
	for _, tt := range tests {
		t.Run(tt.from+" to "+tt.to, func(t *testing.T) {
			err := versionStreamTransition(map[string]any{"target_version": tt.from}, map[string]any{"target_version": tt.to})
			if tt.wantErr == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorContains(t, err, tt.wantErr)
			require.Equal(t, resource.CodeTransition, resource.ErrorCode(err))
		})
	}
}
