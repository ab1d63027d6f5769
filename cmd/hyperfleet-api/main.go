// Command hyperfleet-api is HyperFleet's data API: `migrate` brings the database schema up to date and `serve`
// serves the REST API, health and metrics. Every flag can also be set as HYPERFLEET_<FLAG> in the environment
// (e.g. --db-url as HYPERFLEET_DB_URL).
package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/hyperfleet/hyperfleet/internal/command"
	"github.com/hyperfleet/hyperfleet/internal/postgres"
	"github.com/hyperfleet/hyperfleet/internal/server"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := newRootCommand().ExecuteContext(ctx)
	stop()
	if err != nil {
		fmt.Fprintln(os.Stderr, "hyperfleet-api:", err)
		// 3: the database needs `hyperfleet-api migrate` (its schema, or its required adapters).
		if errors.Is(err, postgres.ErrSchemaOutdated) || errors.Is(err, server.ErrRequiredAdaptersUnset) {
			os.Exit(3)
		}
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "hyperfleet-api",
		Short:         "HyperFleet's cluster-lifecycle data API",
		Version:       command.Version() + " (" + command.Build() + ")",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newServeCommand(&options{}), newMigrateCommand(), newTokenCommand())
	return root
}

// options are the flags both commands share, bound to a server.Config.
type options struct {
	cfg              server.Config
	requiredAdapters []string
	logLevel         string
	rateLimit        optionalFloat
	adapterRateLimit optionalFloat
	gcPercent        int
	memoryLimitMiB   int64
	checkConfig      bool
}

// adapterRateFactor is the adapters' default budget over a user's: one version resolver settled on 10,000 streams
// needs 100 requests/s on average (docs/performance.md), the whole of a user's budget, and its first pass several
// times that.
const adapterRateFactor = 10

// optionalFloat is a float flag that knows whether it was given (on the command line or as HYPERFLEET_<FLAG>), so
// that the environment's default applies when it was not. Unset, it shows no value, which keeps pflag from
// printing a sentinel as "(default …)" beside the usage's own account of the default.
type optionalFloat struct {
	value float64
	set   bool
}

func (f *optionalFloat) String() string {
	if !f.set {
		return ""
	}
	return strconv.FormatFloat(f.value, 'g', -1, 64)
}

func (f *optionalFloat) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		return fmt.Errorf("not a number: %w", err)
	}
	if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return fmt.Errorf("%s is not 0 (unlimited) or a positive number", s)
	}
	f.value, f.set = v, true
	return nil
}

func (f *optionalFloat) Type() string { return "float" }

// or returns the value given, else def.
func (f *optionalFloat) or(def float64) float64 {
	if f.set {
		return f.value
	}
	return def
}

func (o *options) addDatabaseFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.cfg.DB.URL, "db-url", "", "PostgreSQL URL; wins over the --db-*-file secrets")
	fs.StringVar(&o.cfg.DB.HostFile, "db-host-file", "secrets/db.host", "file holding the database host")
	fs.StringVar(&o.cfg.DB.PortFile, "db-port-file", "secrets/db.port", "file holding the database port")
	fs.StringVar(&o.cfg.DB.NameFile, "db-name-file", "secrets/db.name", "file holding the database name")
	fs.StringVar(&o.cfg.DB.UserFile, "db-user-file", "secrets/db.user", "file holding the database user")
	fs.StringVar(&o.cfg.DB.PasswordFile, "db-password-file", "secrets/db.password", "file holding the database password")
	fs.StringVar(&o.cfg.DB.SSLMode, "db-sslmode", "", "libpq sslmode (default: disable in development and tests, verify-full in production)")
	fs.IntVar(&o.cfg.DB.MaxOpenConns, "db-max-open-connections", 50, "connection pool size")
	fs.DurationVar(&o.cfg.DB.StatementTimeout, "db-statement-timeout", 20*time.Second,
		"longest a serving SQL statement may run before the database cancels it (503); 0 = no limit; migrate runs without it")
	fs.DurationVar(&o.cfg.DB.LockTimeout, "db-lock-timeout", 5*time.Second, "longest a statement may wait for a lock (503); 0 = no limit")
	fs.BoolVar(&o.cfg.DB.Debug, "enable-db-debug", false, "log every SQL statement")
	fs.BoolVar(&o.cfg.EmbeddedDB, "embedded-db", false, "start a private PostgreSQL (development); the default in development when no database is configured")
	fs.StringVar(&o.cfg.EmbeddedDataDir, "embedded-db-dir", "", "data directory of the embedded database (default: ~/.cache/hyperfleet/embedded-postgres; /var/cache/hyperfleet/embedded-postgres for root)")
	fs.Uint32Var(&o.cfg.EmbeddedPort, "embedded-db-port", 5433, "port of the embedded database (loopback only)")
	fs.StringVar(&o.logLevel, "log-level", "info", "debug, info, warn or error")
}

// finish applies HYPERFLEET_* environment variables to flags not given on the command line, then the
// environment's defaults.
func (o *options) finish(cmd *cobra.Command) (*slog.Logger, error) {
	if err := command.BindEnv(cmd.Flags(), os.LookupEnv); err != nil {
		return nil, err
	}
	o.cfg.Env = os.Getenv("HYPERFLEET_ENV")
	if o.cfg.Env == "" {
		o.cfg.Env = server.EnvDevelopment
	}
	if o.cfg.DB.SSLMode == "" {
		o.cfg.DB.SSLMode = "disable"
		if o.cfg.Env == server.EnvProduction {
			o.cfg.DB.SSLMode = "verify-full"
		}
	}
	rateLimit := 0.0
	if o.cfg.Env == server.EnvProduction {
		rateLimit = 100
	}
	o.cfg.RateLimit = o.rateLimit.or(rateLimit)
	o.cfg.AdapterRateLimit = o.adapterRateLimit.or(rateLimit * adapterRateFactor)
	// --enable-jwt implies authorization: authenticated callers without roles would all be admins. Only an
	// explicit --enable-authz=false (or HYPERFLEET_ENABLE_AUTHZ=false) keeps it off.
	if f := cmd.Flags().Lookup("enable-authz"); f != nil && o.cfg.EnableJWT && !f.Changed {
		if _, set := os.LookupEnv(command.EnvVar("enable-authz")); !set {
			o.cfg.EnableAuthz = true
		}
	}
	api, health, metrics := server.DefaultBindAddresses(o.cfg.Env, o.cfg.InsecureNoAuth)
	o.cfg.APIBindAddress = cmp.Or(o.cfg.APIBindAddress, api)
	o.cfg.HealthBindAddress = cmp.Or(o.cfg.HealthBindAddress, health)
	o.cfg.MetricsBindAddress = cmp.Or(o.cfg.MetricsBindAddress, metrics)
	if !o.cfg.EmbeddedDB && o.cfg.Env == server.EnvDevelopment && !o.cfg.DB.Configured() {
		o.cfg.EmbeddedDB = true
	}
	log, err := command.Logger(cmd.ErrOrStderr(), o.logLevel)
	if err != nil {
		return nil, err
	}
	// Not given, serve uses the database's required adapters and migrate leaves them as they are.
	if f := cmd.Flags().Lookup("required-adapters"); f != nil && f.Changed {
		required, err := server.ParseRequiredAdapters(o.requiredAdapters)
		if err != nil {
			return nil, err
		}
		o.cfg.RequiredAdapters = required
	}
	o.cfg.Version, o.cfg.Build, o.cfg.BuildTime = command.Version(), command.Build(), command.BuildTime()
	return log, nil
}

// newServeCommand returns `serve` with its flags bound to o.
func newServeCommand(o *options) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Serve the REST API (port 8000), health (8080) and metrics (9090); on loopback outside production",
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := o.finish(cmd)
			if err != nil {
				return err
			}
			if o.checkConfig {
				if err := o.cfg.ValidateServe(); err != nil {
					return err
				}
				_, err := fmt.Fprintln(cmd.OutOrStdout(), "configuration ok")
				return err
			}
			tuneGC(log, o.gcPercent, o.memoryLimitMiB)
			srv, err := server.New(cmd.Context(), o.cfg, log)
			if err != nil {
				return err
			}
			return srv.Run(cmd.Context())
		},
	}
	fs := cmd.Flags()
	o.addDatabaseFlags(fs)
	// Empty defaults, resolved in finish: the address depends on HYPERFLEET_ENV, which the usage explains.
	fs.StringVar(&o.cfg.APIBindAddress, "api-server-bindaddress", "", "API listener (default: 127.0.0.1:8000, loopback; :8000, every interface, with HYPERFLEET_ENV=production)")
	fs.StringVar(&o.cfg.HealthBindAddress, "health-server-bindaddress", "", "health listener, /healthz and /readyz (default: 127.0.0.1:8080; :8080 with HYPERFLEET_ENV=production)")
	fs.StringVar(&o.cfg.MetricsBindAddress, "metrics-server-bindaddress", "", "metrics listener, /metrics (default: 127.0.0.1:9090; :9090 with HYPERFLEET_ENV=production)")
	fs.DurationVar(&o.cfg.HTTPReadTimeout, "http-read-timeout", 30*time.Second, "maximum time to read a request")
	fs.DurationVar(&o.cfg.HTTPWriteTimeout, "http-write-timeout", 30*time.Second, "maximum time to write a response")
	fs.DurationVar(&o.cfg.HTTPIdleTimeout, "http-idle-timeout", 2*time.Minute, "keep-alive idle timeout")
	fs.DurationVar(&o.cfg.ShutdownTimeout, "shutdown-timeout", 20*time.Second, "how long SIGTERM waits for in-flight requests")
	fs.BoolVar(&o.cfg.EnableJWT, "enable-jwt", false, "require bearer JWTs (RS256/ES256); required with HYPERFLEET_ENV=production unless --insecure-no-auth")
	fs.BoolVar(&o.cfg.EnableAuthz, "enable-authz", false, "enforce roles viewer, user, platform, adapter, admin (needs --enable-jwt; on with it unless given as false)")
	fs.BoolVar(&o.cfg.InsecureNoAuth, "insecure-no-auth", false, "serve without authentication where production would refuse it: every caller is an admin, "+
		"and every listener must be (and by default is) on loopback")
	fs.BoolVar(&o.checkConfig, "check-config", false, "check the flags and environment as serve would, print \"configuration ok\" and exit, without opening the database or listening")
	fs.StringVar(&o.cfg.JWT.JWKSURL, "jwk-cert-url", "", "JWKS URL of the token issuer, refreshed for key rotation")
	fs.StringVar(&o.cfg.JWT.JWKSFile, "jwk-cert-file", "", "JWKS or PEM public key file of the token issuer; reloaded when it changes (a bad new file keeps the old keys)")
	fs.StringVar(&o.cfg.JWT.Issuer, "jwt-issuer", "", "required iss claim")
	fs.StringVar(&o.cfg.JWT.Audience, "jwt-audience", "", "required aud claim")
	fs.StringVar(&o.cfg.JWT.IdentityClaim, "jwt-identity-claim", "sub", "claim that names the caller")
	fs.StringVar(&o.cfg.JWT.RolesClaim, "jwt-roles-claim", "roles", "claim with the caller's roles (ignored with --acl-file)")
	fs.StringVar(&o.cfg.JWT.TenantClaim, "tenant-claim", "", "claim that names the caller's tenant (e.g. org_id, tid, hd, or sub for a tenant per user); "+
		"turns tenancy on: users see and change only their tenant's clusters and node pools (docs/tenancy.md). Empty: one tenant, as before")
	fs.StringVar(&o.cfg.ACLFile, "acl-file", "", "YAML/JSON file mapping identities to roles and adapter names (docs/security.md); reloaded when it changes (a bad new file keeps the old one)")
	fs.BoolVar(&o.cfg.EnableHTTPS, "enable-https", false, "serve the API over TLS")
	fs.BoolVar(&o.cfg.EnableHealthHTTPS, "enable-health-https", false, "serve health over TLS")
	fs.BoolVar(&o.cfg.EnableMetricsHTTPS, "enable-metrics-https", false, "serve metrics over TLS")
	fs.StringVar(&o.cfg.HTTPSCertFile, "https-cert-file", "", "PEM certificate (chain) for the TLS listeners; reloaded when it changes")
	fs.StringVar(&o.cfg.HTTPSKeyFile, "https-key-file", "", "PEM private key for the TLS listeners")
	fs.Var(&o.rateLimit, "rate-limit", "requests per second each identity may make, 0 for unlimited (default: 100 with HYPERFLEET_ENV=production, unlimited otherwise)")
	fs.IntVar(&o.cfg.RateBurst, "rate-limit-burst", 0, "burst above --rate-limit (default: one second's worth)")
	fs.Var(&o.adapterRateLimit, "adapter-rate-limit", "requests per second each adapter identity may make per shard (its X-Hyperfleet-Shard), in place of --rate-limit, 0 for unlimited "+
		"(default: 1000 with HYPERFLEET_ENV=production, unlimited otherwise)")
	fs.IntVar(&o.cfg.AdapterRateBurst, "adapter-rate-limit-burst", 0, "burst above --adapter-rate-limit (default: one second's worth)")
	fs.StringVar(&o.cfg.RateLimitsFile, "rate-limits-file", "", "YAML/JSON file of the tenants' budgets per route class (reads, writes, watches), "+
		"a default and per-tenant overrides, on top of --rate-limit (docs/rate-limits.md); reloaded when it changes (a bad new file keeps the old one)")
	fs.BoolVar(&o.cfg.EnableTracing, "enable-tracing", false, "export OpenTelemetry traces over OTLP/HTTP")
	fs.StringVar(&o.cfg.OTLPEndpoint, "otlp-endpoint", "", "OTLP/HTTP traces URL, e.g. http://collector:4318/v1/traces (default: the OTEL_EXPORTER_OTLP_* environment)")
	fs.Float64Var(&o.cfg.TraceSampleRatio, "trace-sample-ratio", 1, "share of new traces kept, 0–1")
	fs.BoolVar(&o.cfg.EnablePprof, "enable-pprof", false, "serve Go's profiler at /debug/pprof/ on the metrics listener")
	fs.IntVar(&o.gcPercent, "gc-percent", 400, "Go GC target: heap growth in percent before a collection (GOGC in the environment wins); "+
		"most of a request's allocations die with it, so collecting less often saves ~20% of list CPU")
	fs.Int64Var(&o.memoryLimitMiB, "memory-limit-mib", 160, "soft memory limit in MiB: the GC collects more often as the heap nears it, whatever --gc-percent says "+
		"(GOMEMLIMIT in the environment wins; 0 for none)")
	fs.Int64Var(&o.cfg.MaxBodyBytes, "max-body-bytes", 1<<20, "largest request body accepted (413 above)")
	fs.StringArrayVar(&o.requiredAdapters, "required-adapters", nil, "adapters that must report per kind, e.g. cluster=hostedcluster-applier;nodepool=hivelocity-provisioner (repeatable); "+
		"checked against the database's, which only migrate sets: serve refuses to start when they differ (default: serve the database's; "+
		"with --embedded-db serve migrates the database itself and sets them)")
	fs.DurationVar(&o.cfg.EventsRetention, "events-retention", 24*time.Hour,
		"how long the change feed keeps events; a watcher further behind gets 410 and lists again")
	fs.DurationVar(&o.cfg.HistoryRetention, "history-retention", 90*24*time.Hour,
		"how long the history of every resource (GET …/history) is kept, after the resource too; 0 keeps it forever; must be 0 or at least --events-retention")
	fs.Int64Var(&o.cfg.EventsMax, "events-max", 1_000_000, "most events the change feed keeps")
	fs.StringVar(&o.cfg.EventsNATSURL, "events-nats-url", "", "also relay the change feed to NATS JetStream at this URL, e.g. nats://127.0.0.1:4222 (one API process at a time relays)")
	fs.StringVar(&o.cfg.EventsNATSStream, "events-nats-stream", "HYPERFLEET", "JetStream stream the relay publishes to (created if missing)")
	fs.StringVar(&o.cfg.EventsNATSSubjectPrefix, "events-nats-subject-prefix", "hyperfleet", "subjects are <prefix>.<kind>.<type>, e.g. hyperfleet.cluster.status")
	o.cfg.EventsNATSAuth.AddFlags(fs, "events-nats-", "the relay")
	fs.DurationVar(&o.cfg.StatusHeartbeat, "status-heartbeat", time.Minute, "longest a status report identical to the stored one (same generation, conditions, data and metadata) "+
		"goes unwritten, so that a settled fleet's re-checks cost a read; its last_report_time moves at least this often (0: write every report). "+
		"Keep adapters' --resync-after above it")
	fs.DurationVar(&o.cfg.WatchHeartbeat, "watch-heartbeat", 15*time.Second, "longest a watch stream shows nothing before a bookmark event says how far it has read the feed (and keeps proxies from closing it)")
	fs.DurationVar(&o.cfg.RequiredAdaptersCheck, "required-adapters-check", 10*time.Second,
		"how often to compare the database's required adapters with the ones served; on a change the replica drains and exits to be restarted on them")
	// Bounds on watches and expensive reads (HTTP edge, part C of issue 20).
	fs.IntVar(&o.cfg.WatchesPerIdentity, "watches-per-identity", 50,
		"watch streams one identity may have open on this process, 0 for no bound (one more is 429 with Retry-After)")
	fs.IntVar(&o.cfg.WatchesTotal, "watches-max", 2000,
		"watch streams this process serves at once, 0 for no bound (one more is 429 with Retry-After)")
	fs.DurationVar(&o.cfg.WatchMaxLifetime, "watch-max-lifetime", 30*time.Minute,
		"longest a watch stream lasts (less up to a tenth at random) before it ends cleanly and its client resumes, authenticating again; 0 for no limit")
	fs.IntVar(&o.cfg.ListsPerIdentity, "lists-per-identity", 8,
		"lists and searches one identity may have running at once on this process, 0 for no bound (one more is 429 with Retry-After)")
	fs.DurationVar(&o.cfg.PhaseCountEvery, "resources-count-every", 30*time.Second,
		"how often /metrics counts the resources by phase (hyperfleet_resources) and those pending for each required adapter (hyperfleet_pending_*) again; scrapes in between export the last counts")
	return cmd
}

// tuneGC sets the collector's target and soft memory limit unless the environment (GOGC, GOMEMLIMIT) did. The
// API's live heap is small and nearly every allocation belongs to one request, so Go's default (collect when the
// heap doubles) collects very often; a larger target with a limit keeps the CPU cost down and the memory bounded.
func tuneGC(log *slog.Logger, percent int, limitMiB int64) {
	if _, set := os.LookupEnv("GOGC"); !set {
		debug.SetGCPercent(percent)
	}
	if _, set := os.LookupEnv("GOMEMLIMIT"); !set && limitMiB > 0 {
		debug.SetMemoryLimit(limitMiB << 20)
	}
	current := debug.SetGCPercent(-1)
	debug.SetGCPercent(current)
	log.Info("garbage collector", slog.Int("gc_percent", current), slog.Int64("memory_limit_bytes", debug.SetMemoryLimit(-1)))
}

func newMigrateCommand() *cobra.Command {
	o := &options{}
	cmd := &cobra.Command{
		Use:   "migrate",
		Short: "Apply database migrations (idempotent; replicas may run it together); set the required adapters",
		Long: `Applies the database migrations. With --required-adapters it also sets which adapters must report on each
kind, for the whole database; it is the only writer of them (serve reads and checks them, and refuses to start on
a database where they were never set: --required-adapters '' requires none). Serving replicas notice a change
within --required-adapters-check, drain and exit, and started again re-aggregate every resource for the new set.
A deleting resource that no adapter of the new set still has to finalize is then removed, and each such removal
is logged. Run without the flag, migrate leaves them as they are.

With --renew-feed-epoch it gives the change feed a new epoch. Run it after restoring the database from a backup,
or after failing over to a replica that may lack the last commits: the feed then hands out sequence numbers it
had handed out before, and the new epoch makes every position of the old history 410 (list again) instead of a
silent skip.`,
		Example: `  hyperfleet-api migrate --db-url postgres://... \
    --required-adapters 'versionstream=version-resolver;cluster=hostedcluster-applier;nodepool=hivelocity-provisioner'`,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log, err := o.finish(cmd)
			if err != nil {
				return err
			}
			return server.RunMigrations(cmd.Context(), o.cfg, log)
		},
	}
	o.addDatabaseFlags(cmd.Flags())
	cmd.Flags().StringArrayVar(&o.requiredAdapters, "required-adapters", nil,
		"set the adapters that must report per kind, e.g. cluster=hostedcluster-applier;nodepool=hivelocity-provisioner (repeatable; default: leave them)")
	cmd.Flags().BoolVar(&o.cfg.RenewFeedEpoch, "renew-feed-epoch", false,
		"give the change feed a new epoch: run it after restoring the database or failing over to a replica that may lack commits, "+
			"so that every watcher lists again instead of missing the events that reuse the old numbers")
	return cmd
}
