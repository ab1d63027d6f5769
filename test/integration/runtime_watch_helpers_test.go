package integration

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/server"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/test/apitest"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

// restartableServer is an in-process hyperfleet-api that a test stops and starts again on the same loopback
// address and database, as a rolled API pod comes back behind its service: a runtime pointed at it reconnects.
type restartableServer struct {
	tb        testing.TB
	addr      string
	overrides server.Config
	srv       *apitest.Server
}

// startRestartable serves dsn (which startServerOn has seeded) on a loopback port and stops it when the test ends;
// overrides are the server's settings but for the database and the address.
func startRestartable(tb testing.TB, dsn string, overrides server.Config) *restartableServer {
	tb.Helper()
	overrides.DB.URL = dsn
	s := &restartableServer{tb: tb, addr: "127.0.0.1:0", overrides: overrides}
	s.start()
	return s
}

// url is the API's address, for adapter.Config.APIURL.
func (s *restartableServer) url() string { return "http://" + s.addr }

func (s *restartableServer) start() {
	s.tb.Helper()
	cfg := s.overrides
	cfg.APIBindAddress = s.addr
	s.srv = apitest.Start(s.tb, cfg)
	s.addr = strings.TrimPrefix(s.srv.API, "http://") // the port chosen the first time is kept for every restart
}

// stop drains and stops the server; the runtime's watch loses its connection.
func (s *restartableServer) stop() { s.srv.Stop() }

// runtimeOn is runtimeConfig for an API the test does not reach through an apiServer: answers are still checked
// against the contract.
func runtimeOn(tb testing.TB, url, name string) adapter.Config {
	tb.Helper()
	cfg := adapter.Defaults(name, "127.0.0.1:0")
	cfg.APIURL = url
	cfg.Transport = harness.NewContract(tb).Transport(tb, http.DefaultTransport.(*http.Transport).Clone())
	cfg.DrainTimeout = 5 * time.Second
	cfg.BackoffBase = 50 * time.Millisecond
	cfg.BackoffMax = time.Second
	return cfg
}

// noPoll sets a poll interval no test waits for: whatever the runtime does, a source other than the poll did.
func noPoll(c *adapter.Config) { c.PollInterval = 10 * time.Minute }

// watchStreams runs a runtime that hears of version streams through the API at url only by its watch (noPoll) and
// counts its reconciles in rec, and waits until it has reconciled the seeded default stream.
func watchStreams(t *testing.T, url string, rec *tally) *adapter.Runner {
	t.Helper()
	return watchStreamsTuned(t, url, rec)
}

// watchStreamsTuned is watchStreams with the runtime's settings changed by tune.
func watchStreamsTuned(t *testing.T, url string, rec *tally, tune ...func(*adapter.Config)) *adapter.Runner {
	t.Helper()
	cfg := runtimeOn(t, url, testAdapter)
	noPoll(&cfg)
	for _, f := range tune {
		f(&cfg)
	}
	runner, err := adapter.New(cfg, testLogger())
	require.NoError(t, err)
	runInBackground(t, func(ctx context.Context) error {
		return runner.Run(ctx, adapter.Controller{Kind: adapter.VersionStreams(), Reconciler: rec})
	})
	eventually(t, "the default stream reconciled", func() bool { return rec.count(defaultStream) == 1 })
	return runner
}

// metricValue returns the value of one series of a runtime's /metrics, written as Prometheus does (labels sorted
// by name), or 0 when the series is not there.
func metricValue(tb testing.TB, runner *adapter.Runner, series string) float64 {
	tb.Helper()
	lines := bufio.NewScanner(strings.NewReader(scrape(tb, "http://"+runner.OpsAddr()+"/metrics")))
	for lines.Scan() {
		if value, ok := strings.CutPrefix(lines.Text(), series+" "); ok {
			v, err := strconv.ParseFloat(value, 64)
			require.NoError(tb, err, series)
			return v
		}
	}
	return 0
}

// series names one series of the test adapter's metrics: name{adapter="test-adapter",<labels>}, labels given
// sorted by name as "k=v".
func series(name string, labels ...string) string {
	parts := []string{`adapter="` + testAdapter + `"`}
	for _, l := range labels {
		k, v, _ := strings.Cut(l, "=")
		parts = append(parts, k+`="`+v+`"`)
	}
	return name + "{" + strings.Join(parts, ",") + "}"
}

// jetStream connects to the shared NATS server, failing the test with how to start it when it does not answer.
func jetStream(tb testing.TB) jetstream.JetStream {
	tb.Helper()
	nc, err := nats.Connect(natsURL, nats.Timeout(2*time.Second))
	if err != nil {
		tb.Fatalf("NATS is not answering on %s (%v); start it with: start-stop-daemon --start --oknodo --background "+
			"--exec /usr/sbin/nats-server -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server", natsURL, err)
	}
	tb.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	require.NoError(tb, err)
	_, err = js.AccountInfo(ctxFor(tb))
	require.NoError(tb, err, "NATS answers on %s but without JetStream: start nats-server with -js", natsURL)
	return js
}

// natsNames returns a stream name and a subject prefix of the test's own, since every test shares the server and
// two streams may not take the same subjects.
func natsNames(tb testing.TB) (stream, prefix string) {
	tb.Helper()
	var b [6]byte
	_, err := rand.Read(b[:])
	require.NoError(tb, err)
	id := hex.EncodeToString(b[:])
	return "HFTEST_" + id, "hftest" + id
}

// ownStream creates a JetStream stream as the API's relay does, under a name and prefix of the test's own, and
// deletes it when the test ends.
func ownStream(tb testing.TB, js jetstream.JetStream) (stream, prefix string) {
	tb.Helper()
	stream, prefix = natsNames(tb)
	_, err := js.CreateStream(ctxFor(tb), jetstream.StreamConfig{Name: stream, Subjects: []string{prefix + ".>"},
		Duplicates: 2 * time.Minute, Storage: jetstream.MemoryStorage})
	require.NoError(tb, err)
	deleteStreamAtEnd(tb, js, stream)
	return stream, prefix
}

// deleteStreamAtEnd deletes a stream (the relay's, or ownStream's) when the test ends.
func deleteStreamAtEnd(tb testing.TB, js jetstream.JetStream, stream string) {
	tb.Helper()
	tb.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := js.DeleteStream(ctx, stream); err != nil && !strings.Contains(err.Error(), "not found") {
			tb.Errorf("delete stream %s: %v", stream, err)
		}
	})
}

// publishEvent publishes an event as the API's relay does: subject <prefix>.<kind>.<type>, the WatchEvent without
// its object, the sequence as the message id.
func publishEvent(tb testing.TB, js jetstream.JetStream, prefix string, e api.WatchEvent) {
	tb.Helper()
	publishTo(tb, js, prefix+"."+strings.ToLower(e.Kind)+"."+string(e.Type), e)
}

// publishTo publishes e (without its object) on subject, with its sequence as the message id.
func publishTo(tb testing.TB, js jetstream.JetStream, subject string, e api.WatchEvent) {
	tb.Helper()
	e.Object = nil
	data, err := json.Marshal(e)
	require.NoError(tb, err)
	publishRaw(tb, js, subject, string(data))
}

// publishRaw publishes data as it is.
func publishRaw(tb testing.TB, js jetstream.JetStream, subject, data string) {
	tb.Helper()
	msg := nats.NewMsg(subject)
	msg.Data = []byte(data)
	_, err := js.PublishMsg(ctxFor(tb), msg)
	require.NoError(tb, err)
}

// consumerSettled waits until the consumer has acknowledged (or terminated) every message the stream holds now:
// whatever the runtime does about them, it has done, since it acknowledges after enqueueing. Every message of the
// stream must be one the consumer takes.
func consumerSettled(tb testing.TB, js jetstream.JetStream, stream, consumer string) {
	tb.Helper()
	st, err := js.Stream(ctxFor(tb), stream)
	require.NoError(tb, err)
	info, err := st.Info(ctxFor(tb))
	require.NoError(tb, err)
	last := info.State.LastSeq
	eventually(tb, "consumer "+consumer+" to acknowledge every message", func() bool {
		c, err := js.Consumer(ctxFor(tb), stream, consumer)
		if err != nil {
			return false
		}
		info, err := c.Info(ctxFor(tb))
		return err == nil && info.AckFloor.Stream >= last && info.NumAckPending == 0
	})
}
