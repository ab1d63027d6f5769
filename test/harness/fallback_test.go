package harness

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"
)

// recordingM stands in for testing.M: it records the server the tests would have found.
type recordingM struct {
	ran bool
	url string
}

func (m *recordingM) Run() int {
	m.ran, m.url = true, os.Getenv(EnvDatabaseURL)
	return 0
}

// TestMainChoosesAServer runs Main's choice with the machine's real PostgreSQL on 127.0.0.1:5432; the container
// start is a stand-in, since a test cannot take the machine's Docker engine away (or give it one).
func TestMainChoosesAServer(t *testing.T) {
	const (
		named     = "postgres://postgres@db.example.com:5432/postgres?sslmode=disable"
		container = "postgres://postgres@127.0.0.1:32768/postgres?sslmode=disable"
		nowhere   = "postgres://postgres@127.0.0.1:1/postgres?sslmode=disable"
	)
	noDocker := errors.New("no Docker engine: Cannot connect to the Docker daemon")
	tests := []struct {
		name         string
		url, image   string // the environment; empty is unset
		containerErr error
		local        string
		wantCode     int
		wantURL      string // the server the tests ran against; empty when they did not run
		wantLog      []string
		wantNoLog    []string
	}{
		{
			name: "the server named in the environment", url: named, local: LocalServerURL,
			wantURL: named, wantLog: []string{"harness: using the server in " + EnvDatabaseURL},
			wantNoLog: []string{"container"},
		},
		{
			name: "a container", local: LocalServerURL,
			wantURL: container, wantLog: []string{"harness: using a " + DefaultPostgresImage + " container"},
			wantNoLog: []string{"local"},
		},
		{
			name: "no container: the local server", containerErr: noDocker, local: LocalServerURL,
			wantURL: LocalServerURL,
			wantLog: []string{
				"harness: no " + DefaultPostgresImage + " container (" + noDocker.Error() + "); trying the local PostgreSQL at " + LocalServerURL,
				"harness: using the local PostgreSQL at " + LocalServerURL,
			},
		},
		{
			name: "no container and no local server", containerErr: noDocker, local: nowhere,
			wantCode: 1,
			wantLog: []string{
				"harness: no PostgreSQL server for the tests: no container, and the local server does not answer",
				"export " + EnvDatabaseURL + "='" + nowhere + "'",
			},
			wantNoLog: []string{"using"},
		},
		{
			name: "the image asked for does not start", image: LocalPostgresImage, containerErr: noDocker, local: LocalServerURL,
			wantCode: 1,
			wantLog: []string{
				"harness: no PostgreSQL server for the tests: " + EnvPostgresImage + "=" + LocalPostgresImage + " did not start",
				"export " + EnvDatabaseURL + "='" + LocalServerURL + "'",
			},
			wantNoLog: []string{"trying the local", "using"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(EnvDatabaseURL, tt.url)
			t.Setenv(EnvPostgresImage, tt.image)
			// run sets these for testcontainers when they are missing; t.Setenv puts back what was there.
			t.Setenv("TESTCONTAINERS_RYUK_DISABLED", "true")
			t.Setenv("TESTCONTAINERS_HOST_OVERRIDE", "127.0.0.1")
			stopped := false
			start := func(_ context.Context, image string) (string, func(), error) {
				if tt.containerErr != nil {
					return "", nil, tt.containerErr
				}
				if image != DefaultPostgresImage {
					t.Errorf("started image %q, want %q", image, DefaultPostgresImage)
				}
				return container, func() { stopped = true }, nil
			}
			var log bytes.Buffer
			m := &recordingM{}

			code := run(m, sources{container: start, local: tt.local, log: &log})

			if code != tt.wantCode {
				t.Errorf("exit code %d, want %d; log:\n%s", code, tt.wantCode, log.String())
			}
			if m.ran != (tt.wantURL != "") || m.url != tt.wantURL {
				t.Errorf("tests ran: %v against %q, want against %q; log:\n%s", m.ran, m.url, tt.wantURL, log.String())
			}
			if tt.wantURL == container && !stopped {
				t.Error("the container was not removed after the tests")
			}
			for _, want := range tt.wantLog {
				if !strings.Contains(log.String(), want) {
					t.Errorf("the log lacks %q:\n%s", want, log.String())
				}
			}
			for _, unwanted := range tt.wantNoLog {
				if strings.Contains(log.String(), unwanted) {
					t.Errorf("the log says %q:\n%s", unwanted, log.String())
				}
			}
		})
	}
}
