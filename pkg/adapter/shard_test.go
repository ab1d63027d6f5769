package adapter

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestShardOfSingleShard(t *testing.T) {
	for _, count := range []int{-1, 0, 1} {
		for _, id := range []string{"", "a", "0195b3c4-6f1e-7c2a-9d3e-5a1b2c3d4e5f"} {
			require.Zero(t, ShardOf(id, count), "id %q count %d", id, count)
		}
	}
}

func TestShardOfIsStable(t *testing.T) {
	// Replicas of different versions run side by side during a rolling update: if the hash changed, they would
	// split the fleet differently and reconcile some resources twice and others never.
	tests := []struct {
		id    string
		count int
		want  int
	}{
		{id: "0195b3c4-6f1e-7c2a-9d3e-5a1b2c3d4e5f", count: 2, want: 1},
		{id: "0195b3c4-6f1e-7c2a-9d3e-5a1b2c3d4e5f", count: 3, want: 0},
		{id: "0195b3c4-6f1e-7c2a-9d3e-5a1b2c3d4e5f", count: 7, want: 4},
		{id: "version-stream-1", count: 2, want: 0},
		{id: "version-stream-1", count: 7, want: 3},
		{id: "a", count: 7, want: 5},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			require.Equal(t, tt.want, ShardOf(tt.id, tt.count), "count %d", tt.count)
		})
	}
}

// v4IDs returns n random-looking version 4 ids, the same ones on every run.
func v4IDs(tb testing.TB, n int) []string {
	tb.Helper()
	rnd := rand.New(rand.NewPCG(1, 2))
	ids := make([]string, n)
	for i := range ids {
		var b [16]byte
		binary.BigEndian.PutUint64(b[:8], rnd.Uint64())
		binary.BigEndian.PutUint64(b[8:], rnd.Uint64())
		b[6] = b[6]&0x0f | 0x40
		b[8] = b[8]&0x3f | 0x80
		ids[i] = uuid.UUID(b).String()
	}
	return ids
}

// v7IDs returns n version 7 ids as the API makes them (uuid.NewV7), created in bursts of 50 a millisecond so
// that many share their timestamp prefix; the same ones on every run.
func v7IDs(tb testing.TB, n int) []string {
	tb.Helper()
	rnd := rand.New(rand.NewPCG(3, 4))
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC).UnixMilli()
	ids := make([]string, n)
	for i := range ids {
		var b [16]byte
		ms := uint64(start + int64(i/50))
		binary.BigEndian.PutUint64(b[:8], ms<<16|0x7000|uint64(i%50)) // 48-bit time, version, 12-bit sequence
		binary.BigEndian.PutUint64(b[8:], rnd.Uint64())
		b[8] = b[8]&0x3f | 0x80
		ids[i] = uuid.UUID(b).String()
	}
	return ids
}

func TestShardOfSpreadsTheFleet(t *testing.T) {
	const n = 10_000
	tests := []struct {
		name string
		ids  []string
	}{
		{name: "v4", ids: v4IDs(t, n)},
		{name: "v7", ids: v7IDs(t, n)},
	}
	for _, tt := range tests {
		for _, count := range []int{2, 3} {
			t.Run(fmt.Sprintf("%s ids in %d shards", tt.name, count), func(t *testing.T) {
				perShard := make([]int, count)
				for _, id := range tt.ids {
					s := ShardOf(id, count)
					require.GreaterOrEqual(t, s, 0)
					require.Less(t, s, count)
					require.Equal(t, s, ShardOf(id, count), "shardOf must be deterministic")
					perShard[s]++
				}
				// The ids are fixed, so this is a property of the hash on them, not a chance outcome.
				even := float64(n) / float64(count)
				for s, got := range perShard {
					require.InDelta(t, even, float64(got), 0.05*even, "shard %d of %d: %v", s, count, perShard)
				}
			})
		}
	}
}

func TestConfigCheck(t *testing.T) {
	valid := func() Config {
		return Defaults("version-resolver", "127.0.0.1:0")
	}
	defaults := valid()
	require.NoError(t, defaults.Check(), "Defaults must pass Check")

	tests := []struct {
		name   string
		mutate func(*Config)
		want   []string // one per problem, each on its own line of the joined error
	}{
		{name: "adapter name with underscore", mutate: func(c *Config) { c.Adapter = "version_resolver" }, want: []string{"--adapter-name"}},
		{name: "adapter name with capitals", mutate: func(c *Config) { c.Adapter = "VersionResolver" }, want: []string{"--adapter-name"}},
		{name: "empty adapter name", mutate: func(c *Config) { c.Adapter = "" }, want: []string{"--adapter-name"}},
		{name: "adapter name starting with a hyphen", mutate: func(c *Config) { c.Adapter = "-resolver" }, want: []string{"--adapter-name"}},
		{name: "adapter name ending with a hyphen", mutate: func(c *Config) { c.Adapter = "resolver-" }, want: []string{"--adapter-name"}},
		{name: "backoff base above max", mutate: func(c *Config) { c.BackoffBase, c.BackoffMax = time.Minute, time.Second }, want: []string{"backoff base"}},
		{name: "adapter name too long", mutate: func(c *Config) { c.Adapter = strings.Repeat("a", 64) }, want: []string{"--adapter-name"}},
		{name: "shard index equals count", mutate: func(c *Config) { c.ShardIndex, c.ShardCount = 2, 2 }, want: []string{"--shard-index 2 must be in [0, --shard-count 2)"}},
		{name: "negative shard index", mutate: func(c *Config) { c.ShardIndex = -1 }, want: []string{"--shard-index -1"}},
		{name: "shard count 0", mutate: func(c *Config) { c.ShardCount = 0 }, want: []string{"[0, --shard-count 0)"}},
		{name: "ftp URL", mutate: func(c *Config) { c.APIURL = "ftp://api:8000" }, want: []string{"--api-url"}},
		{name: "URL without scheme", mutate: func(c *Config) { c.APIURL = "localhost:8000" }, want: []string{"--api-url"}},
		{name: "URL without host", mutate: func(c *Config) { c.APIURL = "http://" }, want: []string{"--api-url"}},
		{name: "negative poll interval", mutate: func(c *Config) { c.PollInterval = -time.Second }, want: []string{"--poll-interval"}},
		{name: "negative watch idle timeout", mutate: func(c *Config) { c.WatchIdleTimeout = -time.Second }, want: []string{"--watch-idle-timeout"}},
		{name: "unknown source", mutate: func(c *Config) { c.Source = "kafka" }, want: []string{"--source \"kafka\""}},
		{name: "nats without a URL", mutate: func(c *Config) { c.Source = SourceNATS }, want: []string{"--nats-url"}},
		{name: "nats with an http URL", mutate: func(c *Config) { c.Source, c.NATSURL = SourceNATS, "http://127.0.0.1:4222" }, want: []string{"--nats-url"}},
		{name: "stream name with a dot", mutate: func(c *Config) { c.NATSStream = "HYPER.FLEET" }, want: []string{"--nats-stream"}},
		{name: "subject prefix with a wildcard", mutate: func(c *Config) { c.NATSSubjectPrefix = "hyperfleet.*" }, want: []string{"--nats-subject-prefix"}},
		{name: "subject prefix with an empty token", mutate: func(c *Config) { c.NATSSubjectPrefix = "a..b" }, want: []string{"--nats-subject-prefix"}},
		{name: "negative resync", mutate: func(c *Config) { c.ResyncAfter = -time.Second }, want: []string{"--resync-after"}},
		{name: "zero workers", mutate: func(c *Config) { c.Workers = 0 }, want: []string{"--workers"}},
		{name: "zero reconcile timeout", mutate: func(c *Config) { c.ReconcileTimeout = 0 }, want: []string{"--reconcile-timeout"}},
		{name: "negative drain timeout", mutate: func(c *Config) { c.DrainTimeout = -time.Second }, want: []string{"--drain-timeout"}},
		{name: "zero backoff", mutate: func(c *Config) { c.BackoffBase, c.BackoffMax = 0, 0 }, want: []string{"backoff base", "backoff max"}},
		{name: "page size 0", mutate: func(c *Config) { c.PageSize = 0 }, want: []string{"page size"}},
		{name: "page size 501", mutate: func(c *Config) { c.PageSize = 501 }, want: []string{"page size"}},
		{
			name: "every problem at once",
			mutate: func(c *Config) {
				c.Adapter, c.ShardIndex, c.APIURL, c.PollInterval, c.ResyncAfter, c.Workers = "Bad!", 5, "ftp://x", -1, -1, 0
			},
			want: []string{"--adapter-name", "--shard-index 5", "--api-url", "--poll-interval", "--resync-after", "--workers"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := valid()
			tt.mutate(&c)
			err := c.Check()
			require.Error(t, err)
			for _, w := range tt.want {
				require.ErrorContains(t, err, w)
			}
			// errors.Join puts one problem on each line: no other setting may be blamed.
			require.Len(t, strings.Split(err.Error(), "\n"), len(tt.want), "problems: %q", err)
		})
	}

	t.Run("valid variations", func(t *testing.T) {
		for _, mutate := range []func(*Config){
			func(c *Config) { c.APIURL = "https://api.example.com/api/hyperfleet/v1/" },
			func(c *Config) { c.ShardIndex, c.ShardCount = 2, 3 },
			func(c *Config) { c.ResyncAfter = time.Hour },
			func(c *Config) { c.Adapter = strings.Repeat("a", 63) },
			func(c *Config) { c.PageSize = 1 },
			func(c *Config) { c.PollInterval = 0 }, // the source's default
			func(c *Config) { c.Source = SourcePoll },
			func(c *Config) { c.Source = "" },
			func(c *Config) { c.Source, c.NATSURL = SourceNATS, "nats://127.0.0.1:4222" },
			func(c *Config) { c.NATSStream, c.NATSSubjectPrefix = "HF_test-1", "hf.test-1" },
		} {
			c := valid()
			mutate(&c)
			require.NoError(t, c.Check())
		}
	})
}

func TestSourceDefaults(t *testing.T) {
	tests := []struct {
		name   string
		cfg    Config
		source string
		poll   time.Duration
	}{
		{name: "default", cfg: Config{}, source: SourceWatch, poll: DefaultSafetyNetInterval},
		{name: "poll alone polls often", cfg: Config{Source: SourcePoll}, source: SourcePoll, poll: DefaultPollInterval},
		{name: "nats", cfg: Config{Source: SourceNATS}, source: SourceNATS, poll: DefaultSafetyNetInterval},
		{name: "a set interval stays", cfg: Config{Source: SourcePoll, PollInterval: time.Minute}, source: SourcePoll, poll: time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.cfg.withSourceDefaults()
			require.Equal(t, tt.source, got.Source)
			require.Equal(t, tt.poll, got.PollInterval)
			require.Equal(t, DefaultWatchIdleTimeout, got.WatchIdleTimeout)
			require.Equal(t, DefaultNATSStream, got.NATSStream)
			require.Equal(t, DefaultNATSSubjectPrefix, got.NATSSubjectPrefix)
		})
	}
}

func TestAPIServer(t *testing.T) {
	tests := []struct {
		url  string
		want string
	}{
		{url: "http://api:8000", want: "http://api:8000"},
		{url: "http://api:8000/", want: "http://api:8000"},
		{url: "http://api:8000/api/hyperfleet/v1", want: "http://api:8000"},
		{url: "http://api:8000/api/hyperfleet/v1/", want: "http://api:8000"},
		{url: "https://gw.example.com/hyperfleet", want: "https://gw.example.com/hyperfleet"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			require.Equal(t, tt.want, apiServer(tt.url))
		})
	}
}
