package server

import (
	"bytes"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestReloadingFollowsTheFile rewrites a real file: a good new version replaces the value, a bad one or a missing
// file keeps the last good value and is logged once, not on every read.
func TestReloadingFollowsTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "value")
	write := func(content string, at time.Time) {
		t.Helper()
		require.NoError(t, os.WriteFile(path, []byte(content), 0o600))
		require.NoError(t, os.Chtimes(path, at, at)) // as a rotation would: a new modification time
	}
	load := func() (string, error) {
		raw, err := os.ReadFile(path)
		if err != nil {
			return "", err
		}
		if strings.HasPrefix(string(raw), "bad") {
			return "", errors.New("not a good file")
		}
		return string(raw), nil
	}
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	now := time.Now()
	write("one", now)
	r, err := newReloading("test file", load, log, path)
	require.NoError(t, err)
	require.Equal(t, "one", r.get())

	write("two", now.Add(time.Minute))
	require.Equal(t, "two", r.get())

	write("bad three", now.Add(2*time.Minute))
	for range 3 {
		require.Equal(t, "two", r.get(), "a bad file keeps the last good value")
	}
	require.Equal(t, 1, strings.Count(logs.String(), "reloading a changed file failed"), logs.String())

	require.NoError(t, os.Remove(path))
	require.Equal(t, "two", r.get(), "a file being replaced keeps the last good value")

	write("four", now.Add(3*time.Minute))
	require.Equal(t, "four", r.get())

	_, err = newReloading("test file", load, log, filepath.Join(t.TempDir(), "absent"))
	require.ErrorContains(t, err, "test file")
	write("bad", now)
	_, err = newReloading("test file", load, log, path)
	require.ErrorContains(t, err, "not a good file")
}
