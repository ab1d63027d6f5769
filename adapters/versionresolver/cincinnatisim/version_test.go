package cincinnatisim

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestCompareVersions(t *testing.T) {
	tests := []struct {
		a, b string
		want int
	}{
		{"4.16.10", "4.16.9", 1},
		{"4.16.0", "4.16.0-rc.1", 1},
		{"4.16.0-rc.10", "4.16.0-rc.9", 1},
		{"4.16.0-rc.0", "4.16.0-ec.3", 1},
		{"4.15.11", "4.16.0-ec.0", -1},
		{"4.16.3", "4.16.3+build", 0},
	}
	for _, tt := range tests {
		t.Run(tt.a+"_"+tt.b, func(t *testing.T) {
			a, err := parseVersion(tt.a)
			require.NoError(t, err)
			b, err := parseVersion(tt.b)
			require.NoError(t, err)
			require.Equal(t, tt.want, a.compare(b))
			require.Equal(t, -tt.want, b.compare(a))
		})
	}
	for _, bad := range []string{"4.16", "4.x.1", "4.16.1-", ""} {
		_, err := parseVersion(bad)
		require.ErrorIs(t, err, ErrInvalidVersion, bad)
	}
}
