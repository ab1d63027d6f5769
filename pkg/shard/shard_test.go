package shard_test

import (
	"testing"

	"github.com/hyperfleet/hyperfleet/pkg/shard"
)

func TestShardLeaseOfIsStableAndInRange(t *testing.T) {
	tests := []struct {
		id    string
		count int
		want  int
	}{
		{id: "anything", count: 0, want: 0},
		{id: "anything", count: 1, want: 0},
	}
	for _, tt := range tests {
		if got := shard.Of(tt.id, tt.count); got != tt.want {
			t.Errorf("Of(%q, %d) = %d, want %d", tt.id, tt.count, got, tt.want)
		}
	}
	for i := range 1000 {
		id := string(rune('a'+i%26)) + string(rune(i))
		if got := shard.Of(id, 7); got < 0 || got >= 7 {
			t.Fatalf("Of(%q, 7) = %d, out of [0, 7)", id, got)
		}
	}
}
