package api_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

func TestParseShard(t *testing.T) {
	tests := []struct {
		in           string
		index, count int
		ok           bool
	}{
		{in: "0/1", index: 0, count: 1, ok: true},
		{in: "3/4", index: 3, count: 4, ok: true},
		{in: "1023/1024", index: 1023, count: 1024, ok: true},
		{in: api.FormatShard(2, 8), index: 2, count: 8, ok: true},
		{in: "4/4"},
		{in: "0/0"},
		{in: "0/1025"},
		{in: "-1/4"},
		{in: "+1/4"},
		{in: "01/4"},
		{in: "1"},
		{in: ""},
		{in: "1/4/5"},
		{in: "a/b"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			index, count, ok := api.ParseShard(tt.in)
			require.Equal(t, tt.ok, ok)
			if ok {
				require.Equal(t, []int{tt.index, tt.count}, []int{index, count})
			}
		})
	}
}
