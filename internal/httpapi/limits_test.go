package httpapi

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestConcurrency(t *testing.T) {
	tests := []struct {
		name               string
		perIdentity, total int
		take               []string // identities taking a slot in turn
		wantOK             []bool
		wantPerIdentity    []bool // for a refusal: the identity's bound, else everyone's
	}{
		{"no bounds", 0, 0, []string{"a", "a", "a", "b"}, []bool{true, true, true, true}, []bool{false, false, false, false}},
		{"per identity", 2, 0, []string{"a", "a", "a", "b"}, []bool{true, true, false, true}, []bool{false, false, true, false}},
		{"in total", 0, 2, []string{"a", "b", "c"}, []bool{true, true, false}, []bool{false, false, false}},
		{"both", 1, 2, []string{"a", "a", "b", "c"}, []bool{true, false, true, false}, []bool{false, true, false, false}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newConcurrency(tt.perIdentity, tt.total)
			var releases []func()
			for i, who := range tt.take {
				release, ok, perIdentity := c.acquire(who)
				require.Equal(t, tt.wantOK[i], ok, "take %d by %s", i, who)
				if ok {
					releases = append(releases, release)
				} else {
					require.Equal(t, tt.wantPerIdentity[i], perIdentity, "take %d by %s", i, who)
				}
			}
			for _, release := range releases {
				release()
				release() // a second release gives nothing back twice
			}
			require.Empty(t, c.open, "released identities are forgotten")
			require.Zero(t, c.all)
			for i, who := range tt.take {
				if tt.wantOK[i] {
					_, ok, _ := c.acquire(who)
					require.True(t, ok, "room again for %s", who)
				}
			}
		})
	}
}

func TestLifetime(t *testing.T) {
	require.Zero(t, lifetime(0), "no limit")
	require.Zero(t, lifetime(-time.Second), "no limit")
	for range 1000 {
		got := lifetime(time.Hour)
		require.LessOrEqual(t, got, time.Hour)
		require.GreaterOrEqual(t, got, time.Hour-6*time.Minute, "at most a tenth less")
	}
}
