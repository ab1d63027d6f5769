package main

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/cmd/hyperfleet-dev/internal/supervisor"
	"github.com/hyperfleet/hyperfleet/internal/server"
)

// testConfig is the default configuration with binaries and kube assets that exist (as empty files) in a temporary
// directory.
func testConfig(t *testing.T) upConfig {
	t.Helper()
	cfg := defaultUpConfig()
	dir := t.TempDir()
	cfg.binDir, cfg.kubeAssets, cfg.devDir = filepath.Join(dir, "bin"), filepath.Join(dir, "k8s"), filepath.Join(dir, "dev")
	cfg.issuerDir = filepath.Join(dir, "issuer")
	for _, d := range []string{cfg.binDir, cfg.kubeAssets} {
		require.NoError(t, os.MkdirAll(d, 0o700))
	}
	for _, name := range []string{"hyperfleet-api", compCincinnati, compHivelocity, compHyperShift, compResolver, compApplier, compProvisioner, compPlacer} {
		require.NoError(t, os.WriteFile(filepath.Join(cfg.binDir, name), nil, 0o700))
	}
	for _, name := range []string{"etcd", "kube-apiserver"} {
		require.NoError(t, os.WriteFile(filepath.Join(cfg.kubeAssets, name), nil, 0o700))
	}
	return cfg
}

func specsOf(t *testing.T, cfg upConfig) map[string]supervisor.Spec {
	t.Helper()
	st, err := newStack(cfg)
	require.NoError(t, err)
	require.NoError(t, st.prepare())
	specs, err := st.specs()
	require.NoError(t, err)
	out := map[string]supervisor.Spec{}
	for _, sp := range specs {
		out[sp.Name] = sp
	}
	return out
}

// flag returns the value after name in args, and whether it is there.
func flag(args []string, name string) (string, bool) {
	i := slices.Index(args, name)
	if i < 0 || i+1 >= len(args) {
		return "", false
	}
	return args[i+1], true
}

// TestClientsFollowAddresses moves every listener and checks that whatever talks to it is told the new address.
func TestClientsFollowAddresses(t *testing.T) {
	cfg := testConfig(t)
	cfg.apiAddr, cfg.healthAddr, cfg.metricsAddr = "127.0.0.1:18000", "127.0.0.1:18080", "127.0.0.1:19090"
	cfg.kubeAddr, cfg.etcdAddr = "127.0.0.1:16443", "127.0.0.1:12379"
	cfg.mcBKubeAddr, cfg.mcBEtcdAddr, cfg.mcBHypershiftAddr = "127.0.0.1:16444", "127.0.0.1:12381", "127.0.0.1:19601"
	cfg.cincinnatiAddr, cfg.hivelocityAddr, cfg.hypershiftAddr = "127.0.0.1:19400", "127.0.0.1:19500", "127.0.0.1:19600"
	cfg.resolverOps, cfg.applierOps, cfg.provisionerOps, cfg.placerOps = "127.0.0.1:18091", "127.0.0.1:18092", "127.0.0.1:18093", "127.0.0.1:18094"
	cfg.dbPort = 15433
	specs := specsOf(t, cfg)
	credentials := filepath.Join(cfg.devDir, dirManagementClusters)
	kubeA, kubeB := kubeComponent(mcA), kubeComponent(mcB)
	simA, simB := hypershiftComponent(mcA), hypershiftComponent(mcB)
	dsn := "postgres://postgres@127.0.0.1:15433/hyperfleet?sslmode=disable"
	tests := []struct {
		component, flag, want string
	}{
		{compPostgres, "--port", "15433"},
		{compMigrate, "--db-url", dsn},
		{compAPI, "--db-url", dsn},
		{compAPI, "--api-server-bindaddress", "127.0.0.1:18000"},
		{compAPI, "--health-server-bindaddress", "127.0.0.1:18080"},
		{compAPI, "--metrics-server-bindaddress", "127.0.0.1:19090"},
		{kubeA, "--listen", "127.0.0.1:16443"},
		{kubeA, "--etcd-listen", "127.0.0.1:12379"},
		{kubeA, "--kubeconfig-out", filepath.Join(credentials, mcA)},
		{kubeB, "--listen", "127.0.0.1:16444"},
		{kubeB, "--etcd-listen", "127.0.0.1:12381"},
		{kubeB, "--kubeconfig-out", filepath.Join(credentials, mcB)},
		{compCincinnati, "--listen", "127.0.0.1:19400"},
		{compHivelocity, "--listen", "127.0.0.1:19500"},
		{simA, "--health-bind-address", "127.0.0.1:19600"},
		{simA, "--kubeconfig", filepath.Join(credentials, mcA)},
		{simB, "--health-bind-address", "127.0.0.1:19601"},
		{simB, "--kubeconfig", filepath.Join(credentials, mcB)},
		{compResolver, "--api-url", "http://127.0.0.1:18000"},
		{compResolver, "--cincinnati-url", "http://127.0.0.1:19400"},
		{compResolver, "--ops-bind-address", "127.0.0.1:18091"},
		{compApplier, "--api-url", "http://127.0.0.1:18000"},
		{compApplier, "--management-cluster-credentials", credentials},
		{compApplier, "--ops-bind-address", "127.0.0.1:18092"},
		{compPlacer, "--api-url", "http://127.0.0.1:18000"},
		{compPlacer, "--ops-bind-address", "127.0.0.1:18094"},
		{compPlacer, "--token-file", filepath.Join(cfg.devDir, compPlacer+".token")},
		{compProvisioner, "--api-url", "http://127.0.0.1:18000"},
		{compProvisioner, "--hivelocity-url", "http://127.0.0.1:19500/api/v2"},
		{compProvisioner, "--ops-bind-address", "127.0.0.1:18093"},
		{compProvisioner, "--token-file", filepath.Join(cfg.devDir, compProvisioner+".token")},
	}
	for _, tt := range tests {
		t.Run(tt.component+" "+tt.flag, func(t *testing.T) {
			sp, ok := specs[tt.component]
			require.True(t, ok)
			got, ok := flag(sp.Args, tt.flag)
			require.True(t, ok, "%s has no %s in %v", tt.component, tt.flag, sp.Args)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestStackStartsInDependencyOrder(t *testing.T) {
	specs := specsOf(t, testConfig(t))
	tests := []struct {
		component   string
		dependsOn   []string
		restartWith []string
	}{
		{compMigrate, []string{compPostgres}, nil},
		{compAPI, []string{compMigrate}, nil},
		// Both kube-apiservers start at once: neither waits for the other.
		{kubeComponent(mcA), nil, nil},
		{kubeComponent(mcB), nil, nil},
		{hypershiftComponent(mcA), []string{kubeComponent(mcA)}, []string{kubeComponent(mcA)}},
		{hypershiftComponent(mcB), []string{kubeComponent(mcB)}, []string{kubeComponent(mcB)}},
		{compSeed, []string{compAPI}, nil},
		{compResolver, []string{compAPI, compCincinnati}, nil},
		// The applier reads a management cluster's new kubeconfig again: it does not restart with its kube.
		{compApplier, []string{compAPI, kubeComponent(mcA), kubeComponent(mcB)}, nil},
		{compProvisioner, []string{compAPI, compHivelocity}, nil},
		{compPlacer, []string{compAPI}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.component, func(t *testing.T) {
			require.Equal(t, tt.dependsOn, specs[tt.component].DependsOn)
			require.Equal(t, tt.restartWith, specs[tt.component].RestartWith)
		})
	}
}

// TestStackVariants checks what the switches change: no embedded database with --db-url, no authentication with
// --auth=false, a build step for the kube assets, extra arguments.
func TestStackVariants(t *testing.T) {
	tests := []struct {
		name   string
		modify func(cfg *upConfig)
		check  func(t *testing.T, cfg upConfig, specs map[string]supervisor.Spec)
	}{
		{"external database", func(cfg *upConfig) { cfg.dbURL = "postgres://db.example:5432/fleet" }, func(t *testing.T, _ upConfig, specs map[string]supervisor.Spec) {
			require.NotContains(t, specs, compPostgres)
			require.Empty(t, specs[compMigrate].DependsOn)
			got, _ := flag(specs[compAPI].Args, "--db-url")
			require.Equal(t, "postgres://db.example:5432/fleet", got)
		}},
		{"authentication", func(*upConfig) {}, func(t *testing.T, cfg upConfig, specs map[string]supervisor.Spec) {
			require.Contains(t, specs[compAPI].Args, "--enable-jwt")
			got, _ := flag(specs[compAPI].Args, "--jwk-cert-file")
			require.Equal(t, filepath.Join(cfg.issuerDir, "dev-jwks.json"), got)
			for _, name := range tokenAdapters() {
				token, err := os.ReadFile(filepath.Join(cfg.devDir, name+".token"))
				require.NoError(t, err)
				require.Equal(t, 2, strings.Count(string(token), "."), "%s's token is a JWT", name)
			}
			require.FileExists(t, filepath.Join(cfg.devDir, fileUserToken))
		}},
		{"no authentication", func(cfg *upConfig) { cfg.auth = false }, func(t *testing.T, cfg upConfig, specs map[string]supervisor.Spec) {
			require.NotContains(t, specs[compAPI].Args, "--enable-jwt")
			_, ok := flag(specs[compResolver].Args, "--token-file")
			require.False(t, ok)
			require.NoFileExists(t, filepath.Join(cfg.devDir, fileUserToken))
		}},
		{"kube assets built first", func(cfg *upConfig) {
			cfg.kubeAssetsBuild = filepath.Join(cfg.kubeAssets, "etcd") // any file: the script is run, not read
		}, func(t *testing.T, cfg upConfig, specs map[string]supervisor.Spec) {
			require.True(t, specs[compKubeAssets].Job)
			require.Equal(t, cfg.kubeAssetsBuild, specs[compKubeAssets].Command)
			require.Equal(t, []string{"HYPERFLEET_K8S_ASSETS=" + cfg.kubeAssets}, specs[compKubeAssets].Env)
			require.Equal(t, []string{compKubeAssets}, specs[kubeComponent(mcA)].DependsOn)
			require.Equal(t, []string{compKubeAssets}, specs[kubeComponent(mcB)].DependsOn)
		}},
		{"no seed", func(cfg *upConfig) { cfg.seed = false }, func(t *testing.T, _ upConfig, specs map[string]supervisor.Spec) {
			require.NotContains(t, specs, compSeed)
		}},
		{"extra arguments", func(cfg *upConfig) {
			cfg.extraArgs = []string{"version-resolver=--log-level=debug", "version-resolver=--workers=2"}
		}, func(t *testing.T, _ upConfig, specs map[string]supervisor.Spec) {
			args := specs[compResolver].Args
			require.Equal(t, []string{"--log-level=debug", "--workers=2"}, args[len(args)-2:])
		}},
		{"scaled simulator durations", func(cfg *upConfig) { cfg.timeScale = 120 }, func(t *testing.T, _ upConfig, specs map[string]supervisor.Spec) {
			got, _ := flag(specs[compHivelocity].Args, "--rate-limit-window")
			require.Equal(t, (30 * time.Second).String(), got)
			got, _ = flag(specs[compProvisioner].Args, "--status-interval")
			require.Equal(t, (1500 * time.Millisecond).String(), got)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t)
			tt.modify(&cfg)
			tt.check(t, cfg, specsOf(t, cfg))
		})
	}
}

func TestStackRefusesBadConfigs(t *testing.T) {
	tests := []struct {
		name   string
		modify func(t *testing.T, cfg *upConfig)
		want   string
	}{
		{"free port", func(_ *testing.T, cfg *upConfig) { cfg.apiAddr = "127.0.0.1:0" }, "--api-address"},
		{"no port", func(_ *testing.T, cfg *upConfig) { cfg.cincinnatiAddr = "localhost" }, "--cincinnati-address"},
		{"every interface", func(_ *testing.T, cfg *upConfig) { cfg.apiAddr = ":8000" }, "stay on loopback"},
		{"another interface", func(_ *testing.T, cfg *upConfig) { cfg.resolverOps = "192.0.2.7:8091" }, "stay on loopback"},
		{"time scale", func(_ *testing.T, cfg *upConfig) { cfg.timeScale = 0 }, "--time-scale"},
		{"extra argument without component", func(_ *testing.T, cfg *upConfig) { cfg.extraArgs = []string{"--verbose"} }, "COMPONENT=ARG"},
		{"missing binary", func(t *testing.T, cfg *upConfig) {
			require.NoError(t, os.Remove(filepath.Join(cfg.binDir, compApplier)))
		}, "make build"},
		{"missing build script", func(_ *testing.T, cfg *upConfig) { cfg.kubeAssetsBuild = "/nonexistent/build.sh" }, "--kube-assets-build"},
		{"missing placer", func(t *testing.T, cfg *upConfig) {
			require.NoError(t, os.Remove(filepath.Join(cfg.binDir, compPlacer)))
		}, "no cluster-placer"},
		{"capacity of an unknown management cluster", func(_ *testing.T, cfg *upConfig) {
			cfg.maxHostedClusters = map[string]int{mcA: 2, mcB: 1, "mc-c": 3}
		}, "--max-hosted-clusters mc-c=3"},
		{"no capacity", func(_ *testing.T, cfg *upConfig) { cfg.maxHostedClusters = map[string]int{mcA: 2, mcB: 0} }, "at least 1"},
		{"a management cluster without capacity", func(_ *testing.T, cfg *upConfig) { cfg.maxHostedClusters = map[string]int{mcA: 2} }, "no capacity for mc-b"},
		{"missing kube assets", func(t *testing.T, cfg *upConfig) {
			require.NoError(t, os.Remove(filepath.Join(cfg.kubeAssets, "kube-apiserver")))
		}, "make k8s-assets"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t)
			tt.modify(t, &cfg)
			_, err := newStack(cfg)
			require.ErrorContains(t, err, tt.want)
		})
	}
	cfg := testConfig(t)
	cfg.extraArgs = []string{"nonesuch=--x"}
	st, err := newStack(cfg)
	require.NoError(t, err)
	_, err = st.specs()
	require.ErrorContains(t, err, "no component nonesuch")
}

// TestCheckListeners takes one of the stack's addresses: the check names its flag.
func TestBannerFollowsTheSimulator(t *testing.T) {
	cfg := testConfig(t)
	cfg.cincinnatiAddr = "127.0.0.1:19400"
	st, err := newStack(cfg)
	require.NoError(t, err)
	require.Contains(t, st.banner(), "publish 4.16 --cincinnati-url http://127.0.0.1:19400)")
}

func TestCheckListeners(t *testing.T) {
	cfg := testConfig(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer func() { _ = l.Close() }()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	for _, addr := range []*string{&cfg.healthAddr, &cfg.metricsAddr, &cfg.kubeAddr, &cfg.etcdAddr, &cfg.cincinnatiAddr,
		&cfg.hivelocityAddr, &cfg.hypershiftAddr, &cfg.resolverOps, &cfg.applierOps, &cfg.provisionerOps, &cfg.placerOps,
		&cfg.mcBKubeAddr, &cfg.mcBEtcdAddr, &cfg.mcBHypershiftAddr} {
		*addr = free.Addr().String() // the same free address for all: each is probed and closed in turn
	}
	require.NoError(t, free.Close())
	cfg.dbURL = "postgres://elsewhere/db"
	cfg.apiAddr = l.Addr().String()
	st, err := newStack(cfg)
	require.NoError(t, err)
	require.ErrorContains(t, st.checkListeners(), "--api-address "+l.Addr().String())
	cfg.apiAddr = cfg.healthAddr
	st, err = newStack(cfg)
	require.NoError(t, err)
	require.NoError(t, st.checkListeners())
}

func TestQuietRequests(t *testing.T) {
	tests := []struct {
		name  string
		auth  bool
		line  string
		quiet bool
	}{
		{"an adapter's poll", true, `{"msg":"request","method":"GET","status":200,"identity":"version-resolver"}`, true},
		{"an adapter's report", true, `{"msg":"request","method":"PUT","status":201,"identity":"hivelocity-provisioner"}`, true},
		{"an adapter's refused report", true, `{"msg":"request","method":"PUT","status":409,"identity":"hivelocity-provisioner"}`, false},
		{"a developer's read", true, `{"msg":"request","method":"GET","status":200,"identity":"developer"}`, false},
		{"any read without authentication", false, `{"msg":"request","method":"GET","status":200}`, true},
		{"a write without authentication", false, `{"msg":"request","method":"POST","status":201}`, false},
		{"not a request", true, `{"msg":"serving","identity":"version-resolver"}`, false},
		{"not JSON", true, `panic: oops`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := testConfig(t)
			cfg.auth = tt.auth
			st, err := newStack(cfg)
			require.NoError(t, err)
			require.Equal(t, tt.quiet, st.quietRequests()([]byte(tt.line)))
		})
	}
	cfg := testConfig(t)
	cfg.allLogs = true
	st, err := newStack(cfg)
	require.NoError(t, err)
	require.Nil(t, st.quietRequests())
}

func TestLockDevDir(t *testing.T) {
	dir := t.TempDir()
	first, err := lockDevDir(dir)
	require.NoError(t, err)
	_, err = lockDevDir(dir)
	require.ErrorIs(t, err, errLocked)
	require.NoError(t, first.Close())
	again, err := lockDevDir(dir)
	require.NoError(t, err)
	require.NoError(t, again.Close())
}

func TestColorOn(t *testing.T) {
	tests := []struct {
		mode    string
		want    bool
		wantErr bool
	}{
		{"always", true, false},
		{"never", false, false},
		{"auto", false, false}, // a buffer is no terminal
		{"sometimes", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.mode, func(t *testing.T) {
			got, err := colorOn(tt.mode, &strings.Builder{})
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestRedactURL(t *testing.T) {
	require.Equal(t, "postgres://fleet:xxxxx@db:5432/fleet", redactURL("postgres://fleet:s3cret@db:5432/fleet"))
	require.Equal(t, "postgres://postgres@127.0.0.1:5433/hyperfleet", redactURL("postgres://postgres@127.0.0.1:5433/hyperfleet"))
}

func TestBanner(t *testing.T) {
	for _, auth := range []bool{true, false} {
		t.Run(fmt.Sprintf("auth=%v", auth), func(t *testing.T) {
			cfg := testConfig(t)
			cfg.auth = auth
			st, err := newStack(cfg)
			require.NoError(t, err)
			require.NoError(t, st.prepare())
			b := st.banner()
			require.Contains(t, b, "http://127.0.0.1:8000/api/hyperfleet/v1")
			require.Contains(t, b, "publish 4.16)", "the default simulator address needs no flag")
			for _, mc := range []string{mcA, mcB} {
				require.Contains(t, b, "KUBECONFIG="+filepath.Join(cfg.devDir, dirManagementClusters, mc))
			}
			require.Contains(t, b, "ManagementClusters mc-a (room for 2), mc-b (room for 1)")
			require.Contains(t, b, "cluster-placer http://127.0.0.1:8094")
			// The staged-rollout walk-through: a canary cluster, a publish, and the rollout's status.
			require.Contains(t, b, ` create cluster canary-1 --labels hyperfleet.io/stage=canary --spec '{"version_stream": "stable-4-16", "upgrade_schedule": "anytime", `)
			require.Contains(t, b, "publish 4.16   (once both are Ready)")
			require.Contains(t, b, " rollout status stable-4-16 ")
			if !auth {
				require.Contains(t, b, "Authentication is OFF")
				return
			}
			token, err := os.ReadFile(filepath.Join(cfg.devDir, fileUserToken))
			require.NoError(t, err)
			require.Contains(t, b, "  "+string(token)+"\n")
			require.Contains(t, b, "login --server http://127.0.0.1:8000 --token-file "+filepath.Join(cfg.devDir, fileUserToken))
		})
	}
}

// TestFleetMode checks how `up` wires the management clusters: the applier reads every kubeconfig from one
// directory instead of one --kubeconfig, each kube-apiserver keeps its own etcd data, the placer reports with a
// token of its own, and every adapter the API waits for is one `up` runs.
func TestFleetMode(t *testing.T) {
	cfg := testConfig(t)
	specs := specsOf(t, cfg)
	applier := specs[compApplier].Args
	_, ok := flag(applier, "--kubeconfig")
	require.False(t, ok, "the applier serves the management clusters of --management-cluster-credentials, not one --kubeconfig")
	a, _ := flag(specs[kubeComponent(mcA)].Args, "--data-dir")
	b, _ := flag(specs[kubeComponent(mcB)].Args, "--data-dir")
	require.NotEqual(t, a, b, "each management cluster keeps its own etcd")
	require.DirExists(t, filepath.Join(cfg.devDir, dirManagementClusters))
	got, _ := flag(specs[compPlacer].Args, "--retry-interval")
	require.Equal(t, "2s", got)

	required, err := server.ParseRequiredAdapters([]string{cfg.requiredAdapters})
	require.NoError(t, err)
	require.Equal(t, map[string][]string{
		"versionstream":     {compResolver},
		"cluster":           {compPlacer, compApplier},
		"nodepool":          {compProvisioner},
		"managementcluster": {compApplier},
	}, required)
	// migrate is the one writer of the required adapters; serve, given the same, only checks them.
	migrated, _ := flag(specs[compMigrate].Args, "--required-adapters")
	served, _ := flag(specs[compAPI].Args, "--required-adapters")
	require.Equal(t, cfg.requiredAdapters, migrated, "the migrate job sets the required adapters")
	require.Equal(t, cfg.requiredAdapters, served)
	makefile, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	require.NoError(t, err)
	require.Contains(t, string(makefile), "\nREQUIRED_ADAPTERS ?= "+cfg.requiredAdapters+"\n", "make run passes the same adapters")
	for _, adapters := range required {
		for _, name := range adapters {
			require.Contains(t, specs, name, "a required adapter `up` does not run keeps every resource of its kind from Ready")
			require.Contains(t, tokenAdapters(), name, "a required adapter needs a token to report with")
		}
	}
}
