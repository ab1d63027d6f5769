package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hyperfleet/hyperfleet/adapters/hivelocity"
	"github.com/hyperfleet/hyperfleet/adapters/hostedcluster"
	"github.com/hyperfleet/hyperfleet/adapters/versionresolver"
	"github.com/hyperfleet/hyperfleet/cmd/hyperfleet-dev/internal/supervisor"
)

// The components `up` runs, by the names their logs are prefixed with. The adapters are named as they report.
const (
	compPostgres    = "postgres"
	compMigrate     = "migrate"
	compAPI         = "hyperfleet-api"
	compKubeAssets  = "k8s-assets"
	compCincinnati  = "cincinnati-sim"
	compHivelocity  = "hivelocity-sim"
	compSeed        = "seed"
	compResolver    = versionresolver.Name
	compApplier     = hostedcluster.Name
	compProvisioner = hivelocity.Name
	// compPlacer is adapters/placement's name (placement.Name), the binary cmd/cluster-placer.
	compPlacer = "cluster-placer"
	// compKube and compHyperShift are suffixed with each management cluster's name (kubeComponent,
	// hypershiftComponent); compHyperShift is also the simulator's binary.
	compKube       = "kube"
	compHyperShift = "hypershift-sim"
)

// stack is the HyperFleet system `up` runs: the components, their flags and the files they share in the dev dir.
type stack struct {
	cfg   upConfig
	self  string              // this binary, for `db` and `kube`
	extra map[string][]string // --arg
	dsn   string
	// tokens is nil without authentication.
	tokens *devTokens
}

// newStack checks the configuration and finds the binaries.
func newStack(cfg upConfig) (*stack, error) {
	for flag, addr := range (&stack{cfg: cfg}).listeners() {
		host, port, err := net.SplitHostPort(addr)
		if err != nil || port == "0" {
			return nil, fmt.Errorf("%s %q: want host:port with a fixed port", flag, addr)
		}
		// A development system accepts development tokens, or none: nothing of it listens beyond this machine.
		if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return nil, fmt.Errorf("%s %q: development listeners stay on loopback (127.0.0.1, ::1 or localhost)", flag, addr)
		}
	}
	if err := checkMaxHostedClusters(cfg.maxHostedClusters); err != nil {
		return nil, err
	}
	if cfg.timeScale <= 0 {
		return nil, fmt.Errorf("--time-scale %v: must be positive", cfg.timeScale)
	}
	extra, err := splitExtraArgs(cfg.extraArgs)
	if err != nil {
		return nil, err
	}
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("own executable: %w", err)
	}
	for _, d := range []*string{&cfg.devDir, &cfg.binDir, &cfg.issuerDir, &cfg.kubeAssets} {
		if *d, err = filepath.Abs(*d); err != nil {
			return nil, err
		}
	}
	if cfg.kubeAssetsBuild != "" {
		if cfg.kubeAssetsBuild, err = filepath.Abs(cfg.kubeAssetsBuild); err != nil {
			return nil, err
		}
		if _, err := os.Stat(cfg.kubeAssetsBuild); err != nil {
			return nil, fmt.Errorf("--kube-assets-build: %w", err)
		}
	}
	s := &stack{cfg: cfg, self: self, extra: extra}
	for _, name := range []string{"hyperfleet-api", compCincinnati, compHivelocity, compHyperShift, compResolver, compApplier, compProvisioner, compPlacer} {
		if _, err := os.Stat(s.bin(name)); err != nil {
			return nil, fmt.Errorf("no %s in %s: build the binaries first (make build), or point --bin-dir at them", name, cfg.binDir)
		}
	}
	if cfg.kubeAssetsBuild == "" {
		for _, name := range []string{"etcd", "kube-apiserver"} {
			if _, err := os.Stat(filepath.Join(cfg.kubeAssets, name)); err != nil {
				return nil, fmt.Errorf("no %s in %s: build the Kubernetes binaries first with `make k8s-assets` (once; 6–25 min cold), or pass --kube-assets-build", name, cfg.kubeAssets)
			}
		}
	}
	s.dsn = cfg.dbURL
	if s.dsn == "" {
		s.dsn = (&url.URL{Scheme: "postgres", User: url.User("postgres"), Host: net.JoinHostPort("127.0.0.1", strconv.FormatUint(uint64(cfg.dbPort), 10)),
			Path: "/hyperfleet", RawQuery: "sslmode=disable"}).String()
	}
	return s, nil
}

func (s *stack) bin(name string) string { return filepath.Join(s.cfg.binDir, name) }

func (s *stack) dev(name string) string { return filepath.Join(s.cfg.devDir, name) }

// Files in the dev dir that components share.
const (
	filePullSecret    = "pull-secret.json"
	fileHivelocityKey = "hivelocity.key"
	fileUserToken     = "user.token"
)

// hivelocityKey is the API key hivelocity-sim accepts by default.
const hivelocityKey = "dev"

// listeners names every address the stack listens on, by the flag that sets it.
func (s *stack) listeners() map[string]string {
	out := map[string]string{
		"--api-address": s.cfg.apiAddr, "--health-address": s.cfg.healthAddr, "--metrics-address": s.cfg.metricsAddr,
		"--kube-address": s.cfg.kubeAddr, "--etcd-address": s.cfg.etcdAddr, "--cincinnati-address": s.cfg.cincinnatiAddr,
		"--hivelocity-address": s.cfg.hivelocityAddr, "--hypershift-health-address": s.cfg.hypershiftAddr,
		"--version-resolver-ops-address": s.cfg.resolverOps, "--hostedcluster-applier-ops-address": s.cfg.applierOps,
		"--hivelocity-provisioner-ops-address": s.cfg.provisionerOps, "--cluster-placer-ops-address": s.cfg.placerOps,
		"--mc-b-kube-address": s.cfg.mcBKubeAddr, "--mc-b-etcd-address": s.cfg.mcBEtcdAddr,
		"--mc-b-hypershift-health-address": s.cfg.mcBHypershiftAddr,
	}
	if s.cfg.dbURL == "" {
		out["--db-port"] = net.JoinHostPort("127.0.0.1", strconv.FormatUint(uint64(s.cfg.dbPort), 10))
	}
	return out
}

// checkListeners fails, naming each, when an address the stack would listen on is taken: another `make run` on
// other state, say. Without it, the components that cannot listen would be restarted again and again.
func (s *stack) checkListeners() error {
	var busy []string
	for flag, addr := range s.listeners() {
		l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", addr)
		if err != nil {
			busy = append(busy, fmt.Sprintf("%s %s", flag, addr))
			continue
		}
		if err := l.Close(); err != nil {
			return fmt.Errorf("probing %s: %w", addr, err)
		}
	}
	if len(busy) > 0 {
		slices.Sort(busy)
		return fmt.Errorf("in use already, by another `hyperfleet-dev up` or something else (move them with these flags, or their make variables): %s",
			strings.Join(busy, ", "))
	}
	return nil
}

// prepare writes what the components read from the dev dir: the management clusters' directory, the pull secret
// and Hivelocity API key (unless a developer put others there) and, with authentication, fresh tokens.
func (s *stack) prepare() error {
	// The applier's credentials directory exists before any kube component writes a kubeconfig into it.
	if err := os.MkdirAll(s.credentialsDir(), 0o700); err != nil {
		return fmt.Errorf("dev dir: %w", err)
	}
	for name, content := range map[string]string{filePullSecret: `{"auths":{}}` + "\n", fileHivelocityKey: hivelocityKey + "\n"} {
		path := s.dev(name)
		if _, err := os.Stat(path); err == nil {
			continue
		}
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			return fmt.Errorf("write %s: %w", path, err)
		}
	}
	if !s.cfg.auth {
		return nil
	}
	tokens, err := newDevTokens(s.cfg.issuerDir, s.cfg.devDir)
	if err != nil {
		return err
	}
	s.tokens = tokens
	return tokens.mintAll()
}

// specs returns the components in the order they are listed; the supervisor starts each once its dependencies
// are ready.
func (s *stack) specs() ([]supervisor.Spec, error) {
	var specs []supervisor.Spec
	add := func(sp supervisor.Spec) { sp.Args = append(sp.Args, s.extra[sp.Name]...); specs = append(specs, sp) }
	env := []string{"HYPERFLEET_ENV=development"}

	migrateDeps := []string(nil)
	if s.cfg.dbURL == "" {
		args := []string{"db", "--port", strconv.FormatUint(uint64(s.cfg.dbPort), 10)}
		if s.cfg.dbDir != "" {
			args = append(args, "--data-dir", s.cfg.dbDir)
		}
		add(supervisor.Spec{
			Name: compPostgres, Command: s.self, Args: args, Ready: postgresProbe(s.dsn),
			// SIGINT is PostgreSQL's fast shutdown, for the server too when it is left in the group.
			StopSignal: syscall.SIGINT, StopTimeout: max(s.cfg.stopTimeout, time.Minute),
		})
		migrateDeps = []string{compPostgres}
	}
	// migrate sets the required adapters, as a deployment's migrate Job does; serve only checks them.
	add(supervisor.Spec{Name: compMigrate, Command: s.bin("hyperfleet-api"),
		Args: []string{"migrate", "--db-url", s.dsn, "--required-adapters", s.cfg.requiredAdapters},
		Env:  env, Job: true, DependsOn: migrateDeps})
	apiArgs := []string{"serve", "--db-url", s.dsn, "--api-server-bindaddress", s.cfg.apiAddr,
		"--health-server-bindaddress", s.cfg.healthAddr, "--metrics-server-bindaddress", s.cfg.metricsAddr,
		"--required-adapters", s.cfg.requiredAdapters, "--shutdown-timeout", "5s"}
	if s.tokens != nil {
		apiArgs = append(apiArgs, s.tokens.serveFlags()...)
	}
	add(supervisor.Spec{Name: compAPI, Command: s.bin("hyperfleet-api"), Args: apiArgs, Env: env,
		DependsOn: []string{compMigrate}, Quiet: s.quietRequests(),
		Ready:  supervisor.HTTPProbe(nil, "http://"+s.cfg.healthAddr+"/readyz"),
		Health: supervisor.HTTPProbe(nil, "http://"+s.cfg.healthAddr+"/healthz")})

	kubeDeps := []string(nil)
	if s.cfg.kubeAssetsBuild != "" {
		add(supervisor.Spec{Name: compKubeAssets, Command: s.cfg.kubeAssetsBuild, Job: true,
			Env: []string{"HYPERFLEET_K8S_ASSETS=" + s.cfg.kubeAssets}})
		kubeDeps = []string{compKubeAssets}
	}
	mcSpecs := s.managementClusterSpecs(kubeDeps)
	for i := range mcSpecs {
		add(mcSpecs[i])
	}

	add(supervisor.Spec{Name: compCincinnati, Command: s.bin(compCincinnati),
		Args: []string{"--listen", s.cfg.cincinnatiAddr, "--state-file", s.dev("cincinnati.json"),
			"--series-minors", strings.Join(s.cfg.seriesMinors, ","), "--series-patches", strconv.Itoa(s.cfg.seriesPatches)},
		Ready: supervisor.HTTPProbe(nil, "http://"+s.cfg.cincinnatiAddr+"/healthz")})
	add(supervisor.Spec{Name: compHivelocity, Command: s.bin(compHivelocity),
		Args: []string{"--listen", s.cfg.hivelocityAddr, "--seed-demo", "--state-file", s.dev("hivelocity.json"),
			"--time-scale", formatFloat(s.cfg.timeScale), "--rate-limit-window", scaled(time.Hour, s.cfg.timeScale).String()},
		Ready: supervisor.HTTPProbe(nil, "http://"+s.cfg.hivelocityAddr+"/_sim/healthz")})

	if s.cfg.seed {
		add(supervisor.Spec{Name: compSeed, Func: s.seed, DependsOn: []string{compAPI}})
	}

	apiURL := "http://" + s.cfg.apiAddr
	adapter := func(name, ops string, deps []string, args ...string) supervisor.Spec {
		// Shard leases as in production (docs/shard-leases.md): one shard, so a second replica started by hand
		// stands by and takes over when the supervised one is stopped.
		args = append([]string{"--api-url", apiURL, "--ops-bind-address", ops, "--poll-interval", s.cfg.pollInterval.String(),
			"--drain-timeout", "10s", "--shard-leases"}, args...)
		if s.tokens != nil {
			args = append(args, "--token-file", s.tokens.adapterFile(name))
		}
		return supervisor.Spec{Name: name, Command: s.bin(name), Args: args, Env: env,
			DependsOn: append([]string{compAPI}, deps...),
			Ready:     supervisor.HTTPProbe(nil, "http://"+ops+"/readyz"),
			Health:    supervisor.HTTPProbe(nil, "http://"+ops+"/healthz")}
	}
	add(adapter(compResolver, s.cfg.resolverOps, []string{compCincinnati},
		"--cincinnati-url", "http://"+s.cfg.cincinnatiAddr, "--recheck-after", s.cfg.streamRecheck.String(),
		"--retry-after", "10s", "--graph-cache-ttl", "2s"))
	// The applier serves every management cluster of the credentials directory and reads a kubeconfig again when
	// its kube component writes a new one, so it need not restart with them; it starts once all are up, so that
	// its first reports find them reachable.
	add(adapter(compApplier, s.cfg.applierOps, s.kubeComponents(),
		"--management-cluster-credentials", s.credentialsDir(), "--pull-secret-file", s.dev(filePullSecret),
		"--progress-interval", "5s"))
	add(adapter(compPlacer, s.cfg.placerOps, nil, "--retry-interval", s.cfg.placementRetry.String()))
	add(adapter(compProvisioner, s.cfg.provisionerOps, []string{compHivelocity},
		"--hivelocity-url", "http://"+s.cfg.hivelocityAddr+"/api/v2", "--api-key-file", s.dev(fileHivelocityKey),
		"--claim-settle", s.cfg.claimSettle.String(), "--provisioning-poll-interval", "2s", "--device-list-ttl", "2s",
		"--status-interval", max(scaled(3*time.Minute, s.cfg.timeScale), time.Second).String(),
		"--shutdown-timeout", max(scaled(5*time.Minute, s.cfg.timeScale), 2*time.Second).String(),
		"--hivelocity-rps", "20", "--hivelocity-burst", "40", "--recheck-after", "30s"))

	for name := range s.extra {
		if !hasSpec(specs, name) {
			return nil, fmt.Errorf("--arg %s=…: no component %s", name, name)
		}
	}
	return specs, nil
}

// quietRequests keeps the API's log lines of the adapters' routine requests (a poll every few seconds each) off
// the console; they stay in its log file. Without authentication the adapters cannot be told from a developer, so
// every successful GET is kept off. Nothing is with --all-logs.
func (s *stack) quietRequests() func([]byte) bool {
	if s.cfg.allLogs {
		return nil
	}
	adapters := map[string]bool{compResolver: true, compApplier: true, compProvisioner: true, compPlacer: true}
	auth := s.cfg.auth
	return func(line []byte) bool {
		var rec struct {
			Msg      string `json:"msg"`
			Method   string `json:"method"`
			Status   int    `json:"status"`
			Identity string `json:"identity"`
		}
		if json.Unmarshal(line, &rec) != nil || rec.Msg != "request" || rec.Status >= 400 {
			return false
		}
		return adapters[rec.Identity] || (!auth && rec.Method == http.MethodGet)
	}
}

func hasSpec(specs []supervisor.Spec, name string) bool {
	return slices.ContainsFunc(specs, func(sp supervisor.Spec) bool { return sp.Name == name })
}

// scaled divides a real system's duration by the simulators' time scale.
func scaled(d time.Duration, scale float64) time.Duration {
	return time.Duration(float64(d) / scale).Round(time.Millisecond)
}

func formatFloat(f float64) string { return strconv.FormatFloat(f, 'g', -1, 64) }

func removeIfExists(path string) error {
	if err := os.Remove(path); err != nil && !os.IsNotExist(err) {
		return err
	}
	return nil
}
