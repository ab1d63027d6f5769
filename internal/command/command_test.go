package command_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/command"
)

// program is a Program whose run records what it was given.
type program struct {
	listen string
	count  int
	ran    bool
}

func (p *program) command(env map[string]string) *command.Program {
	return &command.Program{
		Name: "thing", Short: "a thing",
		Flags: func(fs *pflag.FlagSet) {
			fs.StringVar(&p.listen, "listen", "127.0.0.1:1", "")
			fs.IntVar(&p.count, "device-count", 1, "")
		},
		Run: func(_ context.Context, log *slog.Logger) error {
			p.ran = true
			log.Debug("ran")
			return nil
		},
		Getenv: func(k string) (string, bool) { v, ok := env[k]; return v, ok },
	}
}

func TestProgram(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		wantListen string
		wantCount  int
		wantErr    string
		wantLog    bool
	}{
		{name: "defaults", wantListen: "127.0.0.1:1", wantCount: 1},
		{name: "flags", args: []string{"--listen", ":2", "--device-count", "3"}, wantListen: ":2", wantCount: 3},
		{name: "environment", env: map[string]string{"HYPERFLEET_LISTEN": ":4", "HYPERFLEET_DEVICE_COUNT": "5"}, wantListen: ":4", wantCount: 5},
		{name: "a flag wins over the environment", args: []string{"--listen", ":2"}, env: map[string]string{"HYPERFLEET_LISTEN": ":4"}, wantListen: ":2", wantCount: 1},
		{name: "a bad environment value", env: map[string]string{"HYPERFLEET_DEVICE_COUNT": "many"}, wantErr: "HYPERFLEET_DEVICE_COUNT=\"many\""},
		{name: "the log level from the environment", env: map[string]string{"HYPERFLEET_LOG_LEVEL": "debug"}, wantListen: "127.0.0.1:1", wantCount: 1, wantLog: true},
		{name: "a bad log level", args: []string{"--log-level", "loud"}, wantErr: "--log-level"},
		{name: "arguments", args: []string{"extra"}, wantErr: "unknown command"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &program{}
			cmd := p.command(tt.env).Command()
			var stderr bytes.Buffer
			cmd.SetErr(&stderr)
			cmd.SetArgs(tt.args)
			err := cmd.Execute()
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				require.False(t, p.ran)
				return
			}
			require.NoError(t, err)
			require.True(t, p.ran)
			require.Equal(t, tt.wantListen, p.listen)
			require.Equal(t, tt.wantCount, p.count)
			if tt.wantLog {
				var line map[string]any
				require.NoError(t, json.Unmarshal(stderr.Bytes(), &line), "the log is JSON on the command's stderr")
				require.Equal(t, "ran", line["msg"])
			} else {
				require.Empty(t, stderr.String())
			}
		})
	}
}

func TestVersion(t *testing.T) {
	cmd := (&program{}).command(nil).Command()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetArgs([]string{"--version"})
	require.NoError(t, cmd.Execute())
	require.Equal(t, "thing version "+command.Version()+" ("+command.Build()+")\n", out.String())
}

func TestEnvVar(t *testing.T) {
	require.Equal(t, "HYPERFLEET_DB_URL", command.EnvVar("db-url"))
	require.True(t, strings.HasPrefix(command.EnvVar("x"), command.EnvPrefix))
}
