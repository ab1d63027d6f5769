package integration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/server"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

// natsURL is the NATS server with JetStream that the machines run (see ENVIRONMENT.md); .ci/run starts it.
const natsURL = "nats://127.0.0.1:4222"

// testStream names a JetStream stream and subject prefix of the test's own, deleted when it ends, since every
// test shares the server.
func testStream(t *testing.T) (js jetstream.JetStream, stream, prefix string) {
	t.Helper()
	nc, err := nats.Connect(natsURL, nats.Timeout(5*time.Second))
	if err != nil {
		t.Fatalf("no NATS server at %s (%v): start one with JetStream: start-stop-daemon --start --oknodo --background "+
			"--exec /usr/sbin/nats-server -- -a 127.0.0.1 -p 4222 -js -sd /var/lib/nats-server", natsURL, err)
	}
	t.Cleanup(nc.Close)
	js, err = jetstream.New(nc)
	require.NoError(t, err)
	suffix := make([]byte, 4)
	_, err = rand.Read(suffix)
	require.NoError(t, err)
	stream = "HFTEST_" + strings.ToUpper(hex.EncodeToString(suffix))
	prefix = "hftest" + hex.EncodeToString(suffix)
	t.Cleanup(func() { _ = js.DeleteStream(context.Background(), stream) })
	return js, stream, prefix
}

// relayedMessage is a message as the relay publishes it.
type relayedMessage struct {
	Seq     int64
	Subject string
	MsgID   string
	Event   api.WatchEvent
}

// streamMessages reads every message of the stream, in stream order.
func streamMessages(t *testing.T, js jetstream.JetStream, stream string) []relayedMessage {
	t.Helper()
	msgs, err := readStream(js, stream)
	require.NoError(t, err)
	return msgs
}

// relayedThrough reports whether the stream's last message is the event at seq (false while it does not exist).
func relayedThrough(js jetstream.JetStream, stream string, seq int64) bool {
	msgs, err := readStream(js, stream)
	return err == nil && len(msgs) > 0 && msgs[len(msgs)-1].Event.Seq >= seq
}

func readStream(js jetstream.JetStream, stream string) ([]relayedMessage, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, stream)
	if err != nil {
		return nil, err
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, err
	}
	var out []relayedMessage
	for seq := info.State.FirstSeq; seq > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			return nil, err
		}
		var e api.WatchEvent
		if err := json.Unmarshal(m.Data, &e); err != nil {
			return nil, err
		}
		out = append(out, relayedMessage{Seq: int64(m.Sequence), Subject: m.Subject, MsgID: m.Header.Get(jetstream.MsgIDHeader), Event: e})
	}
	return out, nil
}

// eventHead is the change feed's last sequence in the database.
func eventHead(t *testing.T, dsn string) int64 {
	t.Helper()
	return queryOne[int64](t, dsn, "SELECT coalesce(max(seq), 0) FROM events")
}

// feedEpoch is the change feed's epoch in the database.
func feedEpoch(t *testing.T, dsn string) string {
	t.Helper()
	epoch := queryOne[string](t, dsn, "SELECT epoch FROM event_feed")
	require.NotEmpty(t, epoch)
	return epoch
}

// queryOne reads the one value a query answers, on a connection of its own.
func queryOne[T any](t *testing.T, dsn, query string) T {
	t.Helper()
	ctx := ctxFor(t)
	db, err := pgx.Connect(ctx, dsn)
	require.NoError(t, err)
	defer db.Close(ctx)
	var v T
	require.NoError(t, db.QueryRow(ctx, query).Scan(&v))
	return v
}

// The relay publishes every event of the feed once, in order, on <prefix>.<kind>.<type>, with its position (epoch and
// sequence) as the message id.
func TestRelayPublishesTheFeedToJetStream(t *testing.T) {
	js, stream, prefix := testStream(t)
	s := startServerOn(t, harness.NewDatabase(t), server.Config{RequiredAdapters: map[string][]string{"cluster": {"applier"}},
		EventsNATSURL: natsURL, EventsNATSStream: stream, EventsNATSSubjectPrefix: prefix})
	c := createCluster(t, s, "relayed", nil)
	createNodePool(t, s, c, "pool", 1)
	postClusterStatus(t, s, c, report("applier", 1, time.Now().UTC(), available("True")), http.StatusCreated)
	head := eventHead(t, s.dsn)
	require.Eventually(t, func() bool { return relayedThrough(js, stream, head) }, 10*time.Second, 20*time.Millisecond)
	require.Contains(t, scrape(t, s.metrics+"/metrics"), "hyperfleet_events_relay_leader 1\n", "the one replica leads the relay")
	// The position is recorded after JetStream's acknowledgement, a moment after the stream has the message.
	require.Eventually(t, func() bool {
		return strings.Contains(scrape(t, s.metrics+"/metrics"), "hyperfleet_events_relay_position "+strconv.FormatInt(head, 10)+"\n")
	}, 10*time.Second, 20*time.Millisecond)

	msgs := streamMessages(t, js, stream)
	require.Len(t, msgs, int(head))
	epoch := feedEpoch(t, s.dsn)
	// The test database's seeded version stream comes first.
	want := []string{prefix + ".versionstream.created", prefix + ".cluster.created", prefix + ".nodepool.created", prefix + ".cluster.status"}
	for i, m := range msgs {
		require.Equal(t, int64(i+1), m.Event.Seq)
		require.Equal(t, epoch+"."+strconv.FormatInt(m.Event.Seq, 10), m.MsgID, "the message id is the event's position, epoch included")
		require.Equal(t, want[i], m.Subject)
		require.Nil(t, m.Event.Object, "consumers read the resource from the API")
	}
}

// A relay killed with -9 (after publishing, before recording how far it got, or while writes go on elsewhere) and
// started again publishes what it had not, and JetStream drops what it had: every sequence exactly once, in order.
func TestRelaySurvivesKillNine(t *testing.T) {
	js, stream, prefix := testStream(t)
	writer := startServer(t) // no relay: writes go on here while the relaying process is dead
	flags := []string{"--events-nats-url", natsURL, "--events-nats-stream", stream, "--events-nats-subject-prefix", prefix}
	relaying := startAPIProcess(t, writer.dsn, flags...)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	var written atomic.Int64
	var wg sync.WaitGroup
	write := func(from int) {
		defer wg.Done()
		for i := from; ctx.Err() == nil; i++ {
			resp, err := writer.CreateClusterWithResponse(ctx, nil, api.ClusterCreate{Name: fmt.Sprintf("churn-%05d", i), Spec: clusterSpec(defaultStream)})
			if err != nil || resp.StatusCode() != http.StatusCreated {
				return
			}
			written.Add(1)
		}
	}
	wg.Add(1)
	go write(0)
	require.Eventually(t, func() bool { return relayedThrough(js, stream, 20) }, 20*time.Second, 20*time.Millisecond,
		"the relay publishes while writes go on")
	relaying.kill9(t)
	// While no relay runs, more events commit.
	before := written.Load()
	require.Eventually(t, func() bool { return written.Load() >= before+30 }, 20*time.Second, 10*time.Millisecond)
	cancel()
	wg.Wait()

	// As if the relay had published the last ten and died before recording them: JetStream must drop the repeats.
	db, err := pgx.Connect(ctxFor(t), writer.dsn)
	require.NoError(t, err)
	defer db.Close(ctxFor(t))
	_, err = db.Exec(ctxFor(t), "UPDATE event_relays SET seq = greatest(seq - 10, 0)")
	require.NoError(t, err)

	startAPIProcess(t, writer.dsn, flags...)
	head := eventHead(t, writer.dsn)
	require.Eventually(t, func() bool { return relayedThrough(js, stream, head) }, 20*time.Second, 50*time.Millisecond,
		"the restarted relay catches up")
	msgs := streamMessages(t, js, stream)
	require.Len(t, msgs, int(head), "every event once: none lost, none twice")
	for i, m := range msgs {
		require.Equal(t, int64(i+1), m.Event.Seq, "in order")
	}
	t.Logf("%d events relayed across a kill -9 (%d creates)", head, written.Load())
}
