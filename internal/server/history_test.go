package server

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The history is the longer record: its retention is forever (0) or at least the change feed's.
func TestValidateHistoryRetention(t *testing.T) {
	const day = 24 * time.Hour
	tests := []struct {
		name            string
		history, events time.Duration
		wantErr         bool
	}{
		{name: "forever", history: 0},
		{name: "the flags' defaults", history: 90 * day, events: day},
		{name: "equal to the feed's", history: 2 * day, events: 2 * day},
		{name: "shorter than the feed's", history: day, events: 2 * day, wantErr: true},
		{name: "shorter than the feed's default", history: time.Hour, wantErr: true},
		{name: "negative", history: -time.Hour, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Config{Env: EnvDevelopment, DB: DBConfig{SSLMode: "disable"}, HistoryRetention: tt.history, EventsRetention: tt.events}
			err := c.Validate()
			if tt.wantErr {
				require.ErrorContains(t, err, "--history-retention")
				return
			}
			require.NoError(t, err)
		})
	}
}
