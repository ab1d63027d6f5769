package hvclient_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity/hvclient"
)

func TestValidHostname(t *testing.T) {
	tests := []struct {
		host string
		want bool
	}{
		{"node-1.pool.example.com", true},
		{"a.b", true},
		{"Node-1.Example.COM", true},
		{"node-1.example.com.", false}, // the absolute DNS form is no host name
		{"node-1", false},
		{"", false},
		{".", false},
		{"-node.example.com", false},
		{"node-.example.com", false},
		{"no_underscores.example.com", false},
		{"double..dot.com", false},
		{"x." + strings.Repeat("a", 64) + ".com", false},
		{"x." + strings.Repeat("a", 63) + ".com", true},
		{strings.Repeat("a.", 126) + "bc", false}, // 254 characters
	}
	for _, tt := range tests {
		t.Run(tt.host, func(t *testing.T) {
			require.Equal(t, tt.want, hvclient.ValidHostname(tt.host))
		})
	}
}
