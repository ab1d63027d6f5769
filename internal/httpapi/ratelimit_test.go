package httpapi

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// limiterStep is one request: who, when (after the start) and the wait it should be told.
type limiterStep struct {
	who  string
	at   time.Duration
	want time.Duration
}

func TestIdentityLimiter(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		steps []limiterStep
	}{
		{name: "burst then wait for the next token", steps: []limiterStep{{"a", 0, 0}, {"a", 0, 0}, {"a", 0, 500 * time.Millisecond}, {"a", 250 * time.Millisecond, 250 * time.Millisecond}, {"a", 500 * time.Millisecond, 0}}},
		{name: "identities do not share a bucket", steps: []limiterStep{{"a", 0, 0}, {"a", 0, 0}, {"b", 0, 0}, {"b", 0, 0}, {"a", 0, 500 * time.Millisecond}}},
		{name: "a refused request costs nothing", steps: []limiterStep{{"a", 0, 0}, {"a", 0, 0}, {"a", 0, 500 * time.Millisecond}, {"a", 0, 500 * time.Millisecond}, {"a", 500 * time.Millisecond, 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newIdentityLimiter(2, 2)
			for i, s := range tt.steps {
				require.Equal(t, s.want, l.wait(s.who, start.Add(s.at)), "step %d", i)
			}
		})
	}
}

func TestIdentityLimiterForgetsIdleIdentitiesWhenFull(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := newIdentityLimiter(1, 1)
	for i := range maxTrackedIdentities {
		require.Zero(t, l.wait(fmt.Sprint(i), now))
	}
	// A second later every bucket is full again, so a newcomer makes room by forgetting them.
	require.Zero(t, l.wait("newcomer", now.Add(time.Second)))
	require.Len(t, l.buckets, 1)
}
