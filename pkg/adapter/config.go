package adapter

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/utils/clock"

	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
	"github.com/hyperfleet/hyperfleet/pkg/natsauth"
)

// MaxShards bounds --shard-count.
const MaxShards = api.MaxShardCount

// Sources of work (Config.Source). Every source feeds the same queue, and the poll runs under each: alone, it is
// the source; beside a watch or NATS, it is the safety net that finds what an event could not tell (a lost message,
// a report that grew older than ResyncAfter).
const (
	// SourceWatch lists what is pending, then watches the API's change feed from the list's position with the same
	// filters (Server-Sent Events), resuming after a disconnect and listing again when the position has expired.
	SourceWatch = "watch"
	// SourceNATS consumes the change feed that hyperfleet-api relays to NATS JetStream, with a durable pull
	// consumer per adapter, kind and shard.
	SourceNATS = "nats"
	// SourcePoll only polls.
	SourcePoll = "poll"
)

// Defaults of the sources' settings.
const (
	// DefaultPollInterval is the poll's interval when it is the only source.
	DefaultPollInterval = 5 * time.Second
	// DefaultSafetyNetInterval is the poll's interval beside a watch or NATS.
	DefaultSafetyNetInterval = 5 * time.Minute
	// DefaultWatchIdleTimeout ends a watch that sent nothing, not even a heartbeat (the API sends one every 15 s by
	// default), for this long: the connection is taken for dead and the watch resumes on a new one.
	DefaultWatchIdleTimeout = time.Minute
	// DefaultNATSStream and DefaultNATSSubjectPrefix are hyperfleet-api's relay defaults.
	DefaultNATSStream        = "HYPERFLEET"
	DefaultNATSSubjectPrefix = "hyperfleet"
	// DefaultReportHeartbeat is how long a report that says what the last one said may go unposted. It is not
	// shorter than the API's own window for identical reports (a minute by default), within which the API would
	// not store the post anyway.
	DefaultReportHeartbeat = time.Minute
)

// Config is what every adapter binary is configured with; AddFlags binds it to a command's flags.
type Config struct {
	// Adapter is the name the adapter reports under (its statuses' adapter field), e.g. "version-resolver".
	Adapter string
	// APIURL is hyperfleet-api's address, e.g. http://localhost:8000 (the base path is added if missing).
	APIURL string
	// TokenFile holds the bearer token for the API; empty for an API without authentication.
	TokenFile string
	// Source is where work comes from: SourceWatch (the default when empty), SourceNATS or SourcePoll.
	Source string
	// PollInterval is how often the poll asks for pending resources; 0 is DefaultPollInterval with SourcePoll and
	// DefaultSafetyNetInterval with the others.
	PollInterval time.Duration
	// WatchIdleTimeout ends a silent watch connection (SourceWatch); 0 is DefaultWatchIdleTimeout. It must be
	// longer than the API's --watch-heartbeat.
	WatchIdleTimeout time.Duration
	// NATSURL is the NATS server of SourceNATS, e.g. nats://127.0.0.1:4222.
	NATSURL string
	// NATSStream and NATSSubjectPrefix are where hyperfleet-api relays its change feed (its --events-nats-stream
	// and subject prefix); empty is DefaultNATSStream and DefaultNATSSubjectPrefix.
	NATSStream, NATSSubjectPrefix string
	// NATSAuth is the NATS connection's authentication and TLS, as the API's relay has its own.
	NATSAuth natsauth.Settings
	// ResyncAfter also polls resources last reported on longer ago than this; 0 polls only changes.
	ResyncAfter time.Duration
	// ReportHeartbeat is how long a reconcile whose report would say exactly what this replica last posted
	// (generation, conditions, data, metadata) skips the post: the API's last report time, which drives
	// re-checks and alerts on stuck work, still moves once per ReportHeartbeat (or ResyncAfter, when shorter).
	// 0 posts every report.
	ReportHeartbeat time.Duration
	// Workers reconcile in parallel; one key is never in two workers.
	Workers int
	// ShardIndex and ShardCount split the fleet between replicas by a hash of the resource id.
	ShardIndex, ShardCount int
	// ShardLeases splits the fleet into ShardCount virtual shards that the replicas lease from the API, in place of
	// a fixed ShardIndex: a lost replica's shards move to the others, and replicas come and go without a restart of
	// the rest (docs/shard-leases.md). With one shard, one replica works and the others stand by.
	ShardLeases bool
	// ShardLeaseTTL is how long a lease outlives its last renewal (DefaultShardLeaseTTL when 0); the replica renews
	// every third of it and stops reconciling a shard two thirds of it after its last successful renewal.
	ShardLeaseTTL time.Duration
	// Agreed are the adapter's own settings every replica must share, as they share ShardCount (the Hivelocity
	// provisioner's claim settle): each goes into every report's metadata under its key, and a replica refuses to
	// start when another replica's recent report gives a key another value.
	Agreed map[string]string
	// OpsBindAddress serves /healthz, /readyz and /metrics.
	OpsBindAddress string
	// ReconcileTimeout bounds one Reconcile or Finalize.
	ReconcileTimeout time.Duration
	// DrainTimeout is how long in-flight reconciles may run on after SIGTERM before they are cancelled.
	DrainTimeout time.Duration
	// BackoffBase and BackoffMax bound the per-key retry delay after failures.
	BackoffBase, BackoffMax time.Duration
	// PageSize is the page size of pending polls.
	PageSize int
	// Replica names this process in its reports' metadata (default: the host name).
	Replica string
	// Clock drives polls, delays and backoff; nil is the real clock. Tests use a fake one.
	Clock clock.WithTicker
	// Transport carries the requests to the API; nil is a clone of http.DefaultTransport. Tests wrap it to check
	// every answer against the OpenAPI document.
	Transport http.RoundTripper
}

// DefaultOpsBindAddress returns the ops listener's address on port when none is given. With HYPERFLEET_ENV=production
// it is every interface, since kubelet probes and Prometheus connect from outside the pod; otherwise loopback, so
// that an adapter started for development is not reachable from the network. hyperfleet-api reads the same variable
// for its own listeners.
func DefaultOpsBindAddress(port string) string {
	if os.Getenv("HYPERFLEET_ENV") == "production" {
		return net.JoinHostPort("", port)
	}
	return net.JoinHostPort("127.0.0.1", port)
}

// Defaults returns the configuration an adapter starts from before flags; opsAddr is usually
// DefaultOpsBindAddress's.
func Defaults(adapter string, opsAddr string) Config {
	return Config{
		Adapter: adapter, APIURL: "http://localhost:8000", Source: SourceWatch,
		Workers: 8, ShardIndex: 0, ShardCount: 1, OpsBindAddress: opsAddr, ReconcileTimeout: 2 * time.Minute,
		DrainTimeout: 30 * time.Second, BackoffBase: DefaultBackoffBase, BackoffMax: DefaultBackoffMax, PageSize: 500,
		ReportHeartbeat: DefaultReportHeartbeat,
	}
}

// AddFlags binds the runtime's flags, with c's values as defaults.
func (c *Config) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.APIURL, "api-url", c.APIURL, "hyperfleet-api address")
	fs.StringVar(&c.TokenFile, "token-file", c.TokenFile, "file holding the bearer token for the API, re-read when it changes (empty: no authentication)")
	fs.StringVar(&c.Adapter, "adapter-name", c.Adapter, "name the adapter reports its statuses under")
	fs.StringVar(&c.Source, "source", c.Source, "where work comes from: watch (the API's change feed), nats (its relay to NATS JetStream) or poll; the poll runs under each as a safety net")
	fs.DurationVar(&c.PollInterval, "poll-interval", c.PollInterval, "how often to ask the API for pending resources (0: 5s with --source poll, 5m as the safety net of watch and nats)")
	fs.DurationVar(&c.WatchIdleTimeout, "watch-idle-timeout", c.WatchIdleTimeout, "reconnect a watch that sent nothing for this long; longer than the API's --watch-heartbeat (0: 1m)")
	fs.StringVar(&c.NATSURL, "nats-url", c.NATSURL, "NATS server of --source nats, e.g. nats://127.0.0.1:4222")
	fs.StringVar(&c.NATSStream, "nats-stream", c.NATSStream, "JetStream stream hyperfleet-api relays its change feed to (empty: "+DefaultNATSStream+")")
	fs.StringVar(&c.NATSSubjectPrefix, "nats-subject-prefix", c.NATSSubjectPrefix, "subject prefix of the relayed events, <prefix>.<kind>.<type> (empty: "+DefaultNATSSubjectPrefix+")")
	c.NATSAuth.AddFlags(fs, "nats-", "--source nats")
	fs.DurationVar(&c.ResyncAfter, "resync-after", c.ResyncAfter, "also reconcile resources last reported on longer ago than this (0: only changes)")
	fs.DurationVar(&c.ReportHeartbeat, "report-heartbeat", c.ReportHeartbeat, "how long a report that says what the last one said goes unposted; at least the API's window for identical reports (0: post every report)")
	fs.IntVar(&c.Workers, "workers", c.Workers, "resources reconciled in parallel")
	fs.IntVar(&c.ShardIndex, "shard-index", c.ShardIndex, "this replica's shard, 0 ≤ index < count")
	fs.IntVar(&c.ShardCount, "shard-count", c.ShardCount, "replicas splitting the fleet, or with --shard-leases the virtual shards, e.g. 16 (1: one replica works, the others stand by); every replica needs the same count")
	fs.BoolVar(&c.ShardLeases, "shard-leases", c.ShardLeases, "lease shards from the API instead of --shard-index: a lost replica's shards move to the others, replicas scale without a restart")
	fs.DurationVar(&c.ShardLeaseTTL, "shard-lease-ttl", c.ShardLeaseTTL, "with --shard-leases, how long a lease outlives its last renewal; renewed every third of it (0: 15s)")
	fs.StringVar(&c.OpsBindAddress, "ops-bind-address", c.OpsBindAddress, "address of /healthz, /readyz and /metrics; loopback unless HYPERFLEET_ENV=production")
	fs.DurationVar(&c.ReconcileTimeout, "reconcile-timeout", c.ReconcileTimeout, "longest one reconcile may take")
	fs.DurationVar(&c.DrainTimeout, "drain-timeout", c.DrainTimeout, "how long in-flight work may finish after SIGTERM")
	fs.StringVar(&c.Replica, "replica", c.Replica, "this replica's name in report metadata (default: host name)")
}

// Check returns every setting that cannot work, in one error.
func (c *Config) Check() error {
	var errs []error
	if !conditions.ValidAdapterName(c.Adapter) {
		errs = append(errs, fmt.Errorf("--adapter-name %q must be a DNS label of at most %d characters", c.Adapter, conditions.MaxAdapterName))
	}
	if u, err := url.Parse(c.APIURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		errs = append(errs, fmt.Errorf("--api-url %q must be an http(s) URL", c.APIURL))
	}
	if c.ShardCount > MaxShards {
		errs = append(errs, fmt.Errorf("--shard-count %d is above the most replicas that can split a fleet, %d", c.ShardCount, MaxShards))
	}
	if c.ShardCount < 1 || c.ShardIndex < 0 || c.ShardIndex >= c.ShardCount {
		errs = append(errs, fmt.Errorf("--shard-index %d must be in [0, --shard-count %d)", c.ShardIndex, c.ShardCount))
	}
	errs = append(errs, c.checkShardLeases()...)
	errs = append(errs, c.checkSource()...)
	for name, d := range map[string]time.Duration{"--poll-interval": c.PollInterval, "--watch-idle-timeout": c.WatchIdleTimeout,
		"--report-heartbeat": c.ReportHeartbeat} {
		if d < 0 {
			errs = append(errs, fmt.Errorf("%s must not be negative", name))
		}
	}
	for name, d := range map[string]time.Duration{"--reconcile-timeout": c.ReconcileTimeout,
		"--drain-timeout": c.DrainTimeout, "backoff base": c.BackoffBase, "backoff max": c.BackoffMax} {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("%s must be positive", name))
		}
	}
	if c.BackoffBase > c.BackoffMax {
		errs = append(errs, fmt.Errorf("backoff base %s is above backoff max %s", c.BackoffBase, c.BackoffMax))
	}
	if c.ResyncAfter < 0 {
		errs = append(errs, errors.New("--resync-after must not be negative"))
	}
	if c.Workers < 1 {
		errs = append(errs, errors.New("--workers must be at least 1"))
	}
	if c.PageSize < 1 || c.PageSize > 500 {
		errs = append(errs, errors.New("page size must be 1–500"))
	}
	return errors.Join(errs...)
}

// natsName is a JetStream stream name, and a subject token of the prefix: no dots, wildcards or white space.
var natsName = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

func (c *Config) checkSource() []error {
	var errs []error
	switch c.Source {
	case "", SourceWatch, SourcePoll:
	case SourceNATS:
		if u, err := url.Parse(c.NATSURL); err != nil || (u.Scheme != "nats" && u.Scheme != "tls") || u.Host == "" {
			errs = append(errs, fmt.Errorf("--nats-url %q must be a nats:// or tls:// URL with --source nats", c.NATSURL))
		}
	default:
		errs = append(errs, fmt.Errorf("--source %q must be watch, nats or poll", c.Source))
	}
	if err := c.NATSAuth.Check(); err != nil {
		errs = append(errs, err)
	}
	if c.NATSStream != "" && !natsName.MatchString(c.NATSStream) {
		errs = append(errs, fmt.Errorf("--nats-stream %q must be letters, digits, _ and -", c.NATSStream))
	}
	if c.NATSSubjectPrefix != "" {
		for _, token := range strings.Split(c.NATSSubjectPrefix, ".") {
			if !natsName.MatchString(token) {
				errs = append(errs, fmt.Errorf("--nats-subject-prefix %q must be dot-separated tokens of letters, digits, _ and -", c.NATSSubjectPrefix))
				break
			}
		}
	}
	return errs
}

// withSourceDefaults returns c with the source's defaults in place of its zero values.
func (c Config) withSourceDefaults() Config {
	if c.Source == "" {
		c.Source = SourceWatch
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultSafetyNetInterval
		if c.Source == SourcePoll {
			c.PollInterval = DefaultPollInterval
		}
	}
	if c.WatchIdleTimeout == 0 {
		c.WatchIdleTimeout = DefaultWatchIdleTimeout
	}
	if c.ShardLeases && c.ShardLeaseTTL == 0 {
		c.ShardLeaseTTL = DefaultShardLeaseTTL
	}
	if c.NATSStream == "" {
		c.NATSStream = DefaultNATSStream
	}
	if c.NATSSubjectPrefix == "" {
		c.NATSSubjectPrefix = DefaultNATSSubjectPrefix
	}
	return c
}
