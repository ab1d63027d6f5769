// Package server runs hyperfleet-api: it opens the database (configured or embedded), checks the schema, and
// serves the API, health and metrics listeners until its context ends, then drains.
package server

import (
	"cmp"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/hyperfleet/hyperfleet/internal/auth"
	"github.com/hyperfleet/hyperfleet/openapi"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
	"github.com/hyperfleet/hyperfleet/pkg/natsauth"
)

// DefaultEventsRetention is the change feed's retention when Config.EventsRetention is 0.
const DefaultEventsRetention = 24 * time.Hour

// Environments pick defaults (HYPERFLEET_ENV).
const (
	EnvDevelopment        = "development"
	EnvUnitTesting        = "unit_testing"
	EnvIntegrationTesting = "integration_testing"
	EnvProduction         = "production"
)

// Default ports of the API, health and metrics listeners.
const (
	DefaultAPIPort     = "8000"
	DefaultHealthPort  = "8080"
	DefaultMetricsPort = "9090"
)

// DefaultBindAddresses returns the API, health and metrics listeners' addresses for env when none is given. In
// production they listen on every interface, since a load balancer, kubelet probes and Prometheus connect from
// elsewhere. Everywhere else they listen on loopback: a development server runs an embedded database and accepts
// development tokens, or no authentication at all, and nothing outside the machine should reach it unasked.
//
// insecureNoAuth (--insecure-no-auth) keeps them on loopback in production too.
func DefaultBindAddresses(env string, insecureNoAuth bool) (apiAddr, health, metrics string) {
	host := "127.0.0.1"
	if env == EnvProduction && !insecureNoAuth {
		host = ""
	}
	return net.JoinHostPort(host, DefaultAPIPort), net.JoinHostPort(host, DefaultHealthPort),
		net.JoinHostPort(host, DefaultMetricsPort)
}

// Config is everything serve and migrate need. Flags fill it (cmd/hyperfleet-api).
type Config struct {
	Env string

	APIBindAddress     string
	HealthBindAddress  string
	MetricsBindAddress string
	HTTPReadTimeout    time.Duration
	HTTPWriteTimeout   time.Duration
	HTTPIdleTimeout    time.Duration
	ShutdownTimeout    time.Duration
	MaxBodyBytes       int64
	// EnablePprof serves Go's profiler under /debug/pprof/ on the metrics listener.
	EnablePprof bool
	// HTTPS for the API, health and metrics listeners, each switched on separately, with one key pair.
	EnableHTTPS        bool
	EnableHealthHTTPS  bool
	EnableMetricsHTTPS bool
	HTTPSCertFile      string
	HTTPSKeyFile       string

	DB DBConfig

	// EmbeddedDB starts a private PostgreSQL under EmbeddedDataDir instead of connecting to DB.
	EmbeddedDB      bool
	EmbeddedDataDir string
	EmbeddedPort    uint32

	// Auth: bearer JWTs (EnableJWT) and roles (EnableAuthz; from the token or the ACL file). The command turns
	// EnableAuthz on with EnableJWT unless it was given explicitly.
	EnableJWT   bool
	EnableAuthz bool
	JWT         auth.VerifierConfig
	ACLFile     string
	// InsecureNoAuth is the explicit choice to serve without authentication where that is otherwise refused
	// (production). It forces every listener onto loopback, so that only the machine itself can reach an API on
	// which every caller is an admin.
	InsecureNoAuth bool
	// Tracing exports OpenTelemetry spans over OTLP/HTTP (off by default).
	EnableTracing    bool
	OTLPEndpoint     string
	TraceSampleRatio float64

	// RateLimit per identity (requests per second, 0 = unlimited) and its burst.
	RateLimit float64
	RateBurst int
	// AdapterRateLimit and AdapterRateBurst replace them for callers with role adapter, per identity and shard.
	AdapterRateLimit float64
	AdapterRateBurst int
	// RateLimitsFile holds the tenants' budgets per route class (httpapi.LoadTenantRateLimits), on top of the
	// per-identity ones; it is reloaded when it changes. Empty: tenants are not limited as such.
	RateLimitsFile string

	// RequiredAdapters per kind name, e.g. {"Cluster": ["hostedcluster-applier"]}: what migrate sets, and what
	// serve expects the database to hold (a replica that disagrees does not start; serve never writes them, but
	// on the embedded database, which it migrates itself). nil: not given; migrate leaves the database's as they
	// are and serve uses them. Empty: none.
	RequiredAdapters map[string][]string
	// EventsRetention and EventsMax bound the change feed: events older, or further behind the newest, are
	// removed (a watcher behind them must list again). 0 takes the default (24 h, 1,000,000).
	EventsRetention time.Duration
	EventsMax       int64
	// EventsCompactEvery is how often retention runs (default 30 s).
	EventsCompactEvery time.Duration
	// EventsGrace is how long a watch from a position beyond the feed's head waits for it before 410 (default
	// feed.DefaultGrace); EventsLeaseTTL how long a lost sequencer blocks the others (default
	// postgres.DefaultLeaseTTL). Tests shorten them.
	EventsGrace    time.Duration
	EventsLeaseTTL time.Duration
	// HistoryRetention is how long the history of every resource (GET …/history) is kept; 0 keeps it forever. It
	// must be 0 or at least the change feed's retention: the history is the longer record. HistoryPruneEvery is
	// how often one replica prunes it (default 1 h).
	HistoryRetention  time.Duration
	HistoryPruneEvery time.Duration
	// RenewFeedEpoch (migrate only) gives the change feed a new epoch, after a restore or a failover to a replica
	// that may lack commits: every position handed out before is then answered 410, so clients list again.
	RenewFeedEpoch bool
	// WatchHeartbeat is how long a watch shows nothing before a bookmark event (default 15 s).
	WatchHeartbeat time.Duration
	// StatusHeartbeat is how long a status report identical to the stored one goes unwritten (0: every report is
	// written); resource.Service.SuppressUnchangedReports says what reads the lagging last_report_time.
	StatusHeartbeat time.Duration
	// EventsNATSURL, when set, relays the change feed to NATS JetStream: stream EventsNATSStream (default
	// HYPERFLEET), subjects <EventsNATSSubjectPrefix>.<kind>.<type> (default prefix hyperfleet).
	EventsNATSURL           string
	EventsNATSStream        string
	EventsNATSSubjectPrefix string
	// EventsNATSAuth is the relay's NATS authentication and TLS.
	EventsNATSAuth natsauth.Settings
	// RequiredAdaptersCheck is how often a serving replica compares the database's required adapters with the
	// ones it serves; when they were changed (by migrate), it drains and exits so that it is restarted on them.
	RequiredAdaptersCheck time.Duration

	// Bounds on watches and expensive reads (see httpapi.Config; 0 is no bound, the flags set the defaults):
	// watch streams open per identity and in this process, a watch stream's lifetime, lists running per identity.
	WatchesPerIdentity int
	WatchesTotal       int
	WatchMaxLifetime   time.Duration
	ListsPerIdentity   int
	// PhaseCountEvery is how often /metrics counts the resources by phase, and those pending for their required
	// adapters, again (0: 30 s); scrapes in between export the last counts.
	PhaseCountEvery time.Duration

	// Kinds are the kinds served (nil: api.Kinds()), and OpenAPI the document their schemas come from and the API
	// publishes (nil: the embedded openapi.yaml). A build that serves kinds of its own, such as the throwaway-kind
	// test, sets both and migrates their tables (postgres.KindTableMigration).
	Kinds   *api.KindTable
	OpenAPI []byte

	Version string
	Build   string
	// BuildTime is when the binary was built, RFC 3339 ("" when the build did not stamp it).
	BuildTime string
}

// kinds returns the kinds to serve.
func (c Config) kinds() *api.KindTable {
	if c.Kinds == nil {
		return api.Kinds()
	}
	return c.Kinds
}

// document returns the OpenAPI document to serve.
func (c Config) document() []byte {
	if c.OpenAPI == nil {
		return openapi.Document()
	}
	return c.OpenAPI
}

// DBConfig locates the database. URL, when set, wins over the secret files.
type DBConfig struct {
	URL          string
	HostFile     string
	PortFile     string
	NameFile     string
	UserFile     string
	PasswordFile string
	SSLMode      string
	MaxOpenConns int
	Debug        bool
	// StatementTimeout and LockTimeout bound each statement of the API's connections and its waits for row and
	// table locks (PostgreSQL's statement_timeout and lock_timeout; 0 = none). A request that hits one is a 503.
	StatementTimeout time.Duration
	LockTimeout      time.Duration
}

// Configured reports whether a database was given (a URL or a host secret file that exists).
func (c DBConfig) Configured() bool {
	if c.URL != "" {
		return true
	}
	_, err := os.Stat(c.HostFile)
	return c.HostFile != "" && err == nil
}

// DSN returns the connection URL, reading the secret files when no URL is set. Files hold one value each
// (trailing white space ignored), as Kubernetes secrets mounted as files do.
func (c DBConfig) DSN() (string, error) {
	if c.URL != "" {
		return c.URL, nil
	}
	read := func(path, what string, required bool) (string, error) {
		b, err := os.ReadFile(path)
		if err != nil {
			if !required && os.IsNotExist(err) {
				return "", nil
			}
			return "", fmt.Errorf("database %s: %w (set --db-url, or write the secret files with `make secrets`)", what, err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	host, err := read(c.HostFile, "host", true)
	if err != nil {
		return "", err
	}
	port, err := read(c.PortFile, "port", false)
	if err != nil {
		return "", err
	}
	name, err := read(c.NameFile, "name", true)
	if err != nil {
		return "", err
	}
	user, err := read(c.UserFile, "user", true)
	if err != nil {
		return "", err
	}
	password, err := read(c.PasswordFile, "password", false)
	if err != nil {
		return "", err
	}
	if port == "" {
		port = "5432"
	}
	u := url.URL{Scheme: "postgres", Host: host + ":" + port, Path: "/" + name, User: url.UserPassword(user, password)}
	if password == "" {
		u.User = url.User(user)
	}
	q := url.Values{}
	q.Set("sslmode", c.SSLMode)
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// Validate reports configuration that cannot work for serve or migrate, with the flag to change.
func (c Config) Validate() error {
	switch c.Env {
	case EnvDevelopment, EnvUnitTesting, EnvIntegrationTesting, EnvProduction:
	default:
		return fmt.Errorf("HYPERFLEET_ENV %q must be one of development, unit_testing, integration_testing, production", c.Env)
	}
	if c.Env == EnvProduction && c.EmbeddedDB {
		return fmt.Errorf("--embedded-db is for development: production needs a real database (--db-url or --db-*-file)")
	}
	if (c.EnableHTTPS || c.EnableHealthHTTPS || c.EnableMetricsHTTPS) && (c.HTTPSCertFile == "" || c.HTTPSKeyFile == "") {
		return fmt.Errorf("HTTPS needs --https-cert-file and --https-key-file")
	}
	if c.EnableTracing && (c.TraceSampleRatio < 0 || c.TraceSampleRatio > 1) {
		return fmt.Errorf("--trace-sample-ratio %g must be between 0 and 1", c.TraceSampleRatio)
	}
	if c.JWT.TenantClaim != "" && (!c.EnableJWT || !c.EnableAuthz) {
		return fmt.Errorf("--tenant-claim needs --enable-jwt and --enable-authz: tenants come from verified tokens, and without roles every caller is an admin who sees every tenant")
	}
	if c.EnableAuthz && !c.EnableJWT {
		return fmt.Errorf("--enable-authz needs --enable-jwt: roles come from authenticated identities")
	}
	if c.EnableJWT && (c.JWT.JWKSURL == "") == (c.JWT.JWKSFile == "") {
		return fmt.Errorf("--enable-jwt needs exactly one of --jwk-cert-url and --jwk-cert-file")
	}
	if c.DB.StatementTimeout < 0 || c.DB.LockTimeout < 0 {
		return fmt.Errorf("--db-statement-timeout and --db-lock-timeout must not be negative (0 turns one off)")
	}
	if events := cmp.Or(c.EventsRetention, DefaultEventsRetention); c.HistoryRetention < 0 || (c.HistoryRetention > 0 && c.HistoryRetention < events) {
		return fmt.Errorf("--history-retention %s must be 0 (keep forever) or at least --events-retention %s: the history is the longer record", c.HistoryRetention, events)
	}
	if c.Env == EnvProduction && c.DB.SSLMode == "disable" {
		return fmt.Errorf("--db-sslmode=disable is refused in production")
	}
	return nil
}

// ValidateServe reports what Validate reports, and configuration that serve must refuse although migrate can run
// with it: in production, serving without authentication and authorization, unless --insecure-no-auth says so
// explicitly, and then only on loopback listeners.
func (c Config) ValidateServe() error {
	if err := c.Validate(); err != nil {
		return err
	}
	if c.InsecureNoAuth {
		if c.EnableJWT || c.EnableAuthz {
			return fmt.Errorf("--insecure-no-auth contradicts --enable-jwt and --enable-authz: give one or the other")
		}
		for _, l := range []struct{ flag, addr string }{
			{"--api-server-bindaddress", c.APIBindAddress},
			{"--health-server-bindaddress", c.HealthBindAddress},
			{"--metrics-server-bindaddress", c.MetricsBindAddress},
		} {
			if !isLoopback(l.addr) {
				return fmt.Errorf("--insecure-no-auth serves every caller as an admin, so it listens on loopback only: %s %q is not a loopback address (use 127.0.0.1:<port>)",
					l.flag, l.addr)
			}
		}
		return nil
	}
	if c.Env == EnvProduction && (!c.EnableJWT || !c.EnableAuthz) {
		return fmt.Errorf("production needs authentication and authorization: give --enable-jwt (authorization follows unless " +
			"--enable-authz=false) with --jwk-cert-url or --jwk-cert-file, --jwt-issuer and --jwt-audience; " +
			"or --insecure-no-auth to serve every caller as an admin on loopback only")
	}
	return nil
}

// isLoopback reports whether a listen address binds only the loopback interface: an IP literal in 127.0.0.0/8 or
// ::1, or localhost. An empty host (every interface) is not.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ParseRequiredAdapters reads `cluster=a,b;nodepool=c` into kind name → adapters. Kind names are matched
// case-insensitively against kinds and their plurals when the descriptors are built.
func ParseRequiredAdapters(specs []string) (map[string][]string, error) {
	out := map[string][]string{}
	for _, spec := range specs {
		for _, part := range strings.Split(spec, ";") {
			part = strings.TrimSpace(part)
			if part == "" {
				continue
			}
			kind, list, ok := strings.Cut(part, "=")
			kind = strings.ToLower(strings.TrimSpace(kind))
			if !ok || kind == "" {
				return nil, fmt.Errorf("--required-adapters %q: want <kind>=<adapter>[,<adapter>…]", part)
			}
			for _, a := range strings.Split(list, ",") {
				if a = strings.TrimSpace(a); a == "" {
					continue
				}
				// An adapter can only report under a valid name: a required one that has none would keep every
				// resource of the kind from ever being Ready.
				if !conditions.ValidAdapterName(a) {
					return nil, fmt.Errorf("--required-adapters %q: %q is not an adapter name (a DNS label of at most %d characters: lower-case letters, digits and '-')",
						part, a, conditions.MaxAdapterName)
				}
				out[kind] = append(out[kind], a)
			}
		}
	}
	return out, nil
}
