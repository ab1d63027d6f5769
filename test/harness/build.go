package harness

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Build compiles the main package at pkg (a path relative to the module root, e.g. "./cmd/hyperfleet-api") into a
// temporary directory and returns the binary's path. Tests that need a real process (its memory, its signals, its
// flags) use it; Go's build cache makes every build after the first take about a second.
func Build(tb testing.TB, pkg string) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	root, err := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}").Output()
	if err != nil {
		tb.Fatalf("find the module root with go list: %v", err)
	}
	out := filepath.Join(tb.TempDir(), filepath.Base(pkg))
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, pkg)
	cmd.Dir = strings.TrimSpace(string(root))
	if msg, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build %s: %v\n%s", pkg, err, msg)
	}
	return out
}
