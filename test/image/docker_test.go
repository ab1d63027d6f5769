package image

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const (
	// testImage is the tag the test builds; it is its own, so that a developer's hyperfleet/hyperfleet:dev from
	// `make image` is left as it was. The build caches are shared, so building both costs one compile.
	testImage = "hyperfleet/hyperfleet:image-test"

	// version and build are stamped into the test image. Fixed values keep a second run fully cached (a new
	// version would relink every binary), and values no `make image` would produce prove the stamping works.
	testVersion = "v0.0.0-image-test"
	testBuild   = "image-test"

	// buildTimeout bounds the image build, to end a hang rather than to judge speed: a cold one (modules
	// downloaded, every package compiled) takes about four minutes on two idle cores, but `make test` builds it
	// while the other packages' tests share those cores, and a cold build then ran past 8 minutes; a warm one
	// takes seconds.
	buildTimeout = 20 * time.Minute
)

const noDocker = `image: no Docker engine: %v

This test builds the HyperFleet image and runs it, so it needs Docker. On Debian, as root:
    apt-get install -y docker.io
    dockerd --storage-driver=vfs >/var/log/dockerd.log 2>&1 &
.ci/run does the same (installs docker.io, starts dockerd) when it provisions the test database with Docker.`

// requireDocker fails the test, saying how to get one, unless a Docker engine answers.
func requireDocker(tb testing.TB) {
	tb.Helper()
	if _, err := exec.LookPath("docker"); err != nil {
		tb.Fatalf(noDocker, "no docker CLI on PATH")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		tb.Fatalf(noDocker, fmt.Errorf("docker info: %w: %s", err, bytes.TrimSpace(out)))
	}
}

// buildImage builds testImage with deploy/build-image.sh, the script behind `make image`, and returns its name.
func buildImage(tb testing.TB) string {
	tb.Helper()
	script, err := filepath.Abs(filepath.Join("..", "..", "deploy", "build-image.sh"))
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Env = append(os.Environ(), "IMAGE="+testImage, "VERSION="+testVersion, "BUILD="+testBuild)
	started := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		tb.Fatalf("image: %s (after %s): %v\n%s", script, time.Since(started).Round(time.Second), err, tail(out, 60))
	}
	tb.Logf("image: %s built in %s", testImage, time.Since(started).Round(100*time.Millisecond))
	return testImage
}

// docker runs the docker CLI and returns its standard output; it fails tb with the command's output otherwise.
func docker(tb testing.TB, args ...string) string {
	tb.Helper()
	out, err := dockerErr(args...)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	return out
}

// dockerErr runs the docker CLI and returns its standard output, or an error holding its standard error.
func dockerErr(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("docker %s: %w\n%s", strings.Join(args, " "), err, tail(stderr.Bytes(), 40))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// tail returns the last n lines of out.
func tail(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{"…"}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}
