package httpapi

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/resource"
)

// Positions round-trip through their spelling; a bare number parses (with no epoch, which the feed answers 410)
// and anything else is refused (400).
func TestPositionSpelling(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want resource.Position
		ok   bool
	}{
		{"3f9c2a17b0d4e851.42", resource.Position{Epoch: "3f9c2a17b0d4e851", Seq: 42}, true},
		{" 3f9c2a17b0d4e851.0 ", resource.Position{Epoch: "3f9c2a17b0d4e851", Seq: 0}, true},
		{"42", resource.Position{Seq: 42}, true},
		{"", resource.Position{}, false},
		{".42", resource.Position{}, false},
		{"3f9c.", resource.Position{}, false},
		{"3f9c.-1", resource.Position{}, false},
		{"XYZ.1", resource.Position{}, false},
		{"3f9c.1.2", resource.Position{}, false},
		{"x", resource.Position{}, false},
	} {
		t.Run(tc.in, func(t *testing.T) {
			got, ok := parsePosition(tc.in)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.want, got)
			if ok && got.Epoch != "" {
				again, ok := parsePosition(formatPosition(got))
				require.True(t, ok)
				require.Equal(t, got, again)
			}
		})
	}
}
