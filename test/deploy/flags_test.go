package deploy

import (
	"context"
	"encoding/json"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// envPrefix starts the variables hyperfleet-api reads as flags: HYPERFLEET_DB_URL is --db-url.
const envPrefix = "HYPERFLEET_"

// envNotFlags are HYPERFLEET_ variables that are read as they are, not as a flag.
var envNotFlags = []string{"HYPERFLEET_ENV"}

// envFlagBinaries are the binaries that read each flag from HYPERFLEET_<FLAG> as well (hyperfleet-api's
// options.finish); the adapters read only HYPERFLEET_ENV.
var envFlagBinaries = []string{"hyperfleet-api"}

// TestManifestFlagsExist runs every container's binary, built from this tree, with the container's arguments (as
// Kubernetes expands them for the first replica) and --help. A binary parses its flags before it looks at --help,
// so an unknown flag, a value that does not parse or a stray argument fails it exactly as it would fail the pod;
// nothing else runs. HYPERFLEET_ variables from the environment and ConfigMaps must set a flag of the command too.
func TestManifestFlagsExist(t *testing.T) {
	objs := render(t, deployDir)
	ws := workloads(t, objs)
	var binaries []string
	for _, w := range ws {
		for _, c := range w.containers() {
			require.Len(t, c.Command, 1, "%s/%s: command names the binary in the image and nothing else", w, c.Name)
			require.Equal(t, "/usr/local/bin", path.Dir(c.Command[0]), "%s/%s: the image's binaries are in /usr/local/bin", w, c.Name)
			if !slices.Contains(binaries, path.Base(c.Command[0])) {
				binaries = append(binaries, path.Base(c.Command[0]))
			}
		}
	}
	bin := buildBinaries(t, binaries)

	// Which commands read each HYPERFLEET_ variable; a variable must be a flag of at least one of them (migrate
	// shares serve's ConfigMap and ignores the variables it has no flag for, as every command does).
	type reader struct {
		commands []string
		isFlag   bool
	}
	readers := map[string]*reader{}
	for _, w := range ws {
		for _, c := range w.containers() {
			args := expandArgs(t, w, c)
			command := path.Base(c.Command[0])
			if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
				command += " " + args[0] // a subcommand
			}
			t.Run(w.String()+"/"+c.Name, func(t *testing.T) {
				binary := path.Base(c.Command[0])
				flags := helpFlags(runHelp(t, bin[binary], args))
				for name := range hyperfleetVariables(t, objs, c) {
					if readers[name] == nil {
						readers[name] = &reader{}
					}
					readers[name].commands = append(readers[name].commands, command)
					readers[name].isFlag = readers[name].isFlag ||
						slices.Contains(envFlagBinaries, binary) && slices.Contains(flags, flagOf(name))
				}
			})
		}
	}
	require.NotEmpty(t, readers, "the manifests configure the API through HYPERFLEET_ variables")
	for name, r := range readers {
		if !slices.Contains(envNotFlags, name) {
			require.True(t, r.isFlag, "%s sets no flag of %s: the variable does nothing", name, strings.Join(slices.Compact(r.commands), ", "))
		}
	}
}

// TestContainersRunInProduction checks that every container gets HYPERFLEET_ENV=production: the API then refuses an
// unencrypted database connection, and the adapters' ops listeners default to every interface, where kubelet's
// probes and Prometheus reach them.
func TestContainersRunInProduction(t *testing.T) {
	objs := render(t, deployDir)
	for _, w := range workloads(t, objs) {
		for _, c := range w.containers() {
			t.Run(w.String()+"/"+c.Name, func(t *testing.T) {
				require.Equal(t, "production", hyperfleetVariables(t, objs, c)["HYPERFLEET_ENV"])
			})
		}
	}
}

// buildBinaries builds the named cmd/ binaries from this tree into a temporary directory, in one go command so that
// they share the work, and returns their paths by name.
func buildBinaries(tb testing.TB, names []string) map[string]string {
	tb.Helper()
	sort.Strings(names)
	dir := tb.TempDir()
	args := []string{"build", "-o", dir + "/"}
	for _, n := range names {
		args = append(args, "./cmd/"+n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = filepath.Join("..", "..")
	out, err := cmd.CombinedOutput()
	require.NoError(tb, err, "go %s:\n%s", strings.Join(args, " "), out)
	paths := map[string]string{}
	for _, n := range names {
		paths[n] = filepath.Join(dir, n)
	}
	return paths
}

func runHelp(tb testing.TB, binary string, args []string) string {
	tb.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, append(slices.Clone(args), "--help")...).CombinedOutput()
	require.NoError(tb, err, "%s %s --help:\n%s", filepath.Base(binary), strings.Join(args, " "), out)
	return string(out)
}

// helpFlag matches a flag in a cobra usage: "  -h, --help   help for serve" or "      --db-url string   …".
var helpFlag = regexp.MustCompile(`(?m)^\s+(?:-\w, )?--([a-z0-9][a-z0-9-]*)`)

func helpFlags(help string) []string {
	var flags []string
	for _, m := range helpFlag.FindAllStringSubmatch(help, -1) {
		flags = append(flags, m[1])
	}
	return flags
}

// flagOf returns the flag a HYPERFLEET_ variable sets: HYPERFLEET_JWT_ISSUER is jwt-issuer.
func flagOf(name string) string {
	rest, ok := strings.CutPrefix(name, envPrefix)
	if !ok || slices.Contains(envNotFlags, name) {
		return ""
	}
	return strings.ToLower(strings.ReplaceAll(rest, "_", "-"))
}

// hyperfleetVariables returns the HYPERFLEET_ variables c gets, from env and from the ConfigMaps of envFrom, with
// their values ("" for one taken from elsewhere).
func hyperfleetVariables(tb testing.TB, objs []*unstructured.Unstructured, c corev1.Container) map[string]string {
	tb.Helper()
	vars := map[string]string{}
	for _, from := range c.EnvFrom {
		require.Nil(tb, from.SecretRef, "%s: secrets are mounted as files, never put in the environment", c.Name)
		require.NotNil(tb, from.ConfigMapRef)
		data, _, err := unstructured.NestedStringMap(find(tb, objs, "ConfigMap", from.ConfigMapRef.Name).Object, "data")
		require.NoError(tb, err)
		for k, v := range data {
			vars[from.Prefix+k] = v
		}
	}
	// env wins over envFrom, as in Kubernetes.
	for _, e := range c.Env {
		vars[e.Name] = e.Value
	}
	maps.DeleteFunc(vars, func(name, _ string) bool { return !strings.HasPrefix(name, envPrefix) })
	return vars
}

// TestAPIServesUnderTheProductionRule runs every `hyperfleet-api serve` container's arguments, with the HYPERFLEET_
// variables its ConfigMaps give it and nothing else of this machine's environment, through serve --check-config:
// the manifests must satisfy the rule that production serves with authentication and authorization. The image's
// own defaults (its ENV and CMD, as a bare `docker run` uses them) must not: they are refused, not served open.
func TestAPIServesUnderTheProductionRule(t *testing.T) {
	objs := render(t, deployDir)
	bin := buildBinaries(t, []string{"hyperfleet-api"})["hyperfleet-api"]
	checkConfig := func(tb testing.TB, vars map[string]string, args []string) (string, error) {
		tb.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, append(slices.Clone(args), "--check-config")...)
		cmd.Env = []string{"HOME=" + tb.TempDir()}
		for k, v := range vars {
			cmd.Env = append(cmd.Env, k+"="+v)
		}
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	served := 0
	for _, w := range workloads(t, objs) {
		for _, c := range w.containers() {
			args := expandArgs(t, w, c)
			if path.Base(c.Command[0]) != "hyperfleet-api" || len(args) == 0 || args[0] != "serve" {
				continue
			}
			served++
			t.Run(w.String()+"/"+c.Name, func(t *testing.T) {
				vars := hyperfleetVariables(t, objs, c)
				require.Equal(t, "production", vars["HYPERFLEET_ENV"])
				out, err := checkConfig(t, vars, args)
				require.NoError(t, err, "serve refuses the manifest's configuration:\n%s", out)
				require.Contains(t, out, "configuration ok")
			})
		}
	}
	require.NotZero(t, served, "deploy/ runs no hyperfleet-api serve")

	t.Run("the image's defaults are refused", func(t *testing.T) {
		env, cmd := dockerfileDefaults(t)
		require.Equal(t, "production", env["HYPERFLEET_ENV"])
		out, err := checkConfig(t, map[string]string{"HYPERFLEET_ENV": env["HYPERFLEET_ENV"]}, append(cmd, "--db-url", "postgres://db.example.com/x"))
		require.Error(t, err)
		require.Contains(t, out, "production needs authentication and authorization")
	})
}

// dockerfileDefaults returns the final stage's ENV variables and its CMD (exec form) from the repository's
// Dockerfile.
func dockerfileDefaults(tb testing.TB) (map[string]string, []string) {
	tb.Helper()
	raw, err := os.ReadFile(filepath.Join("..", "..", "Dockerfile"))
	require.NoError(tb, err)
	env := map[string]string{}
	var cmd []string
	for _, line := range strings.Split(string(raw), "\n") {
		switch {
		case strings.HasPrefix(line, "FROM "):
			env, cmd = map[string]string{}, nil // only the final stage counts
		case strings.HasPrefix(line, "ENV "):
			for _, kv := range strings.Fields(strings.TrimPrefix(line, "ENV ")) {
				k, v, ok := strings.Cut(kv, "=")
				require.True(tb, ok, "ENV %q: the test reads the KEY=value form", line)
				env[k] = v
			}
		case strings.HasPrefix(line, "CMD "):
			require.NoError(tb, json.Unmarshal([]byte(strings.TrimPrefix(line, "CMD ")), &cmd), "CMD must be in exec form: %q", line)
		}
	}
	require.NotEmpty(tb, cmd, "the Dockerfile has no CMD")
	return env, cmd
}
