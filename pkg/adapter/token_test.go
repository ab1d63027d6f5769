package adapter

import (
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// mtime0 is the modification time token files start with; rotations move it on, as a rewrite does.
var mtime0 = time.Unix(1_700_000_000, 0)

// writeToken writes content to path with the given modification time.
func writeToken(tb testing.TB, path, content string, mtime time.Time) {
	tb.Helper()
	require.NoError(tb, os.WriteFile(path, []byte(content), 0o600))
	require.NoError(tb, os.Chtimes(path, mtime, mtime))
}

// newTestTokenFile writes content to a fresh token file, opens it and replaces its clock with one the test
// moves by calling the returned advance.
func newTestTokenFile(tb testing.TB, content string) (tf *tokenFile, path string, advance func(time.Duration)) {
	tb.Helper()
	path = filepath.Join(tb.TempDir(), "token")
	writeToken(tb, path, content, mtime0)
	tf, err := newTokenFile(path)
	require.NoError(tb, err)
	now := tf.checked
	tf.now = func() time.Time { return now }
	return tf, path, func(d time.Duration) { now = now.Add(d) }
}

// requireToken asserts what Token returns now.
func requireToken(tb testing.TB, tf *tokenFile, want string) {
	tb.Helper()
	got, err := tf.Token()
	require.NoError(tb, err)
	require.Equal(tb, want, got)
}

func TestTokenFile(t *testing.T) {
	t.Run("reads and trims the token", func(t *testing.T) {
		tf, _, _ := newTestTokenFile(t, "  tok-1\n")
		requireToken(t, tf, "tok-1")
	})

	t.Run("rotation is picked up once the recheck interval has passed", func(t *testing.T) {
		tf, path, advance := newTestTokenFile(t, "tok-1\n")
		writeToken(t, path, "tok-2-longer\n", mtime0.Add(time.Hour))

		advance(tf.recheck - time.Nanosecond)
		requireToken(t, tf, "tok-1") // cached: the file is not even looked at

		advance(time.Nanosecond)
		requireToken(t, tf, "tok-2-longer")
	})

	t.Run("rotation to a token of the same length is picked up by its mtime", func(t *testing.T) {
		// Service-account tokens from one issuer often have the same length.
		tf, path, advance := newTestTokenFile(t, "tok-1")
		writeToken(t, path, "tok-2", mtime0.Add(time.Hour))
		advance(tf.recheck)
		requireToken(t, tf, "tok-2")
	})

	t.Run("an unchanged file is not read again; invalidate forces a read", func(t *testing.T) {
		tf, path, advance := newTestTokenFile(t, "tok-1")
		// Same size, same mtime: to Token the file looks unchanged, so only a read could see tok-2.
		writeToken(t, path, "tok-2", mtime0)
		advance(tf.recheck)
		requireToken(t, tf, "tok-1")

		// As after a 401: the next Token reads the file even within the recheck interval.
		tf.invalidate()
		requireToken(t, tf, "tok-2")
	})

	t.Run("a file removed mid-rotation keeps the old token", func(t *testing.T) {
		tf, path, advance := newTestTokenFile(t, "tok-1")
		require.NoError(t, os.Remove(path))
		advance(tf.recheck)
		requireToken(t, tf, "tok-1")
		tf.invalidate()
		requireToken(t, tf, "tok-1")

		writeToken(t, path, "tok-2", mtime0.Add(time.Hour))
		advance(tf.recheck)
		requireToken(t, tf, "tok-2")
	})

	t.Run("a file emptied mid-rotation keeps the old token", func(t *testing.T) {
		tf, path, advance := newTestTokenFile(t, "tok-1")
		writeToken(t, path, "\n", mtime0.Add(time.Hour))
		advance(tf.recheck)
		requireToken(t, tf, "tok-1")

		writeToken(t, path, "tok-2", mtime0.Add(2*time.Hour))
		advance(tf.recheck)
		requireToken(t, tf, "tok-2")
	})
}

func TestNewTokenFileErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name    string
		content *string // nil: no file
		check   func(tb testing.TB, err error)
	}{
		{name: "missing", check: func(tb testing.TB, err error) { require.ErrorIs(tb, err, fs.ErrNotExist) }},
		{name: "empty", content: new(""), check: func(tb testing.TB, err error) { require.ErrorContains(tb, err, "is empty") }},
		{name: "only whitespace", content: new(" \n\t\n"), check: func(tb testing.TB, err error) { require.ErrorContains(tb, err, "is empty") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(dir, tt.name)
			if tt.content != nil {
				writeToken(t, path, *tt.content, mtime0)
			}
			tf, err := newTokenFile(path)
			require.Error(t, err)
			require.Nil(t, tf)
			tt.check(t, err)
		})
	}
}
