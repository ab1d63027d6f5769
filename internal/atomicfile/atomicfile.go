// Package atomicfile writes files that a reader, or a crash, sees whole or not at all: the data goes to a
// temporary file in the same directory, is synced, and is renamed over the target. It imports only the standard
// library, so that the API, the development supervisor and the simulators can share it.
package atomicfile

import (
	"os"
	"path/filepath"
)

// WriteFile replaces path with data, with mode perm, creating its directory (0700) when missing. A concurrent
// reader sees the old file or the new one; after a crash or a power loss the file is one or the other.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	tmp, err := WriteTemp(dir, data, perm)
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// WriteTemp writes data, synced, to a new file in dir with mode perm and returns its name, for a caller that
// publishes it otherwise than by rename (os.Link, to create a file only if it does not exist).
func WriteTemp(dir string, data []byte, perm os.FileMode) (string, error) {
	f, err := os.CreateTemp(dir, ".tmp-*")
	if err != nil {
		return "", err
	}
	name := f.Name()
	_, err = f.Write(data)
	if err == nil {
		err = f.Chmod(perm)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(name)
		return "", err
	}
	return name, nil
}
