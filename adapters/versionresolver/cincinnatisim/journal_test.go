package cincinnatisim_test

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/adapters/versionresolver/cincinnatisim"
)

func TestOpenJournal(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		return path
	}
	tests := []struct {
		name    string
		path    string
		want    int
		wantErr error
	}{
		{"missing file is an empty journal", filepath.Join(dir, "absent.json"), 0, nil},
		{"entries", write("ok.json", `[{"op":"publish","channel":"stable-4.16","arch":"amd64","version":"4.16.3"},
			{"op":"remove","channel":"stable-4.16","arch":"amd64","version":"4.16.0"}]`), 2, nil},
		{"not JSON", write("bad.json", `[{`), 0, cincinnatisim.ErrInvalidJournal},
		{"unknown op", write("op.json", `[{"op":"rename"}]`), 0, cincinnatisim.ErrInvalidJournal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			j, err := cincinnatisim.OpenJournal(tt.path)
			if tt.wantErr != nil {
				require.ErrorIs(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Len(t, j.Entries(), tt.want)
		})
	}
}

// TestJournalReplay replays a removal of a release the series no longer holds (not an error) and a publish.
func TestJournalReplay(t *testing.T) {
	path := filepath.Join(t.TempDir(), "journal.json")
	j, err := cincinnatisim.OpenJournal(path)
	require.NoError(t, err)
	for _, e := range []cincinnatisim.JournalEntry{
		{Op: cincinnatisim.OpRemove, PublishRequest: cincinnatisim.PublishRequest{Channel: "stable-4.16", Arch: "amd64", Version: "4.16.7"}},
		{Op: cincinnatisim.OpPublish, PublishRequest: cincinnatisim.PublishRequest{Channel: "stable-4.16", Arch: "amd64", Version: "4.16.2"}},
	} {
		require.NoError(t, j.Record(e))
	}
	reopened, err := cincinnatisim.OpenJournal(path)
	require.NoError(t, err)
	require.Equal(t, j.Entries(), reopened.Entries())

	sim := cincinnatisim.New()
	require.NoError(t, sim.AddSeries(cincinnatisim.Series{Minors: []string{"4.16"}, Patches: 2}))
	require.NoError(t, reopened.Replay(sim))
	g, ok := sim.Graph("stable-4.16", "amd64")
	require.True(t, ok)
	require.Len(t, g.Nodes, 3)
	require.Equal(t, "4.16.2", g.Nodes[2].Version)
}

func TestHealth(t *testing.T) {
	srv := cincinnatisim.New().Start()
	t.Cleanup(srv.Close)
	resp, err := http.Get(srv.URL + cincinnatisim.HealthPath)
	require.NoError(t, err)
	_ = resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}
