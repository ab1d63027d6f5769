package atomicfile

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWriteFileReplacesWholeAndLeavesNoTemporaryFile(t *testing.T) {
	tests := []struct {
		name string
		perm os.FileMode
	}{
		{"private", 0o600},
		{"public", 0o644},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "created", "on", "demand")
			path := filepath.Join(dir, "state.json")
			require.NoError(t, WriteFile(path, []byte("old"), tt.perm))
			require.NoError(t, WriteFile(path, []byte("new"), tt.perm))
			got, err := os.ReadFile(path)
			require.NoError(t, err)
			require.Equal(t, "new", string(got))
			info, err := os.Stat(path)
			require.NoError(t, err)
			require.Equal(t, tt.perm, info.Mode().Perm())
			entries, err := os.ReadDir(dir)
			require.NoError(t, err)
			require.Len(t, entries, 1, "only the file itself: %v", entries)
		})
	}
}
