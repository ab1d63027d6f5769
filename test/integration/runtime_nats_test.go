package integration

import (
	"net/http"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/server"
	"github.com/hyperfleet/hyperfleet/pkg/adapter"
	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/test/harness"
)

// fromNATS makes a runtime take its events from the relay's stream and subject prefix.
func fromNATS(stream, prefix string) func(*adapter.Config) {
	return func(c *adapter.Config) {
		c.Source, c.NATSURL, c.NATSStream, c.NATSSubjectPrefix = adapter.SourceNATS, natsURL, stream, prefix
	}
}

// The NATS source against messages published the way the relay publishes them: it reconciles what an event says
// needs it, leaves alone what the adapter has already reported on, terminates what it cannot read, asks the API
// when its own reports cannot tell, and forgets a removed resource; every message is acknowledged.
func TestNATSSourceConsumesRelayedEvents(t *testing.T) {
	js := jetStream(t)
	stream, prefix := ownStream(t, js)
	s := startServerWith(t, map[string][]string{"versionstream": {testAdapter}})
	rec := newTally()
	runner := startRuntime(t, s, rec, noPoll, fromNATS(stream, prefix))
	eventually(t, "the default stream reconciled by the first poll", func() bool { return rec.count(defaultStream) == 1 })
	consumer := adapter.ConsumerName(testAdapter, adapter.VersionStreams(), 0, 1)
	_, err := js.Consumer(ctxFor(t), stream, consumer)
	require.NoError(t, err, "the durable consumer exists")

	// Resources made through an API that relays nothing: only the test's messages tell the runtime.
	later := createStream(t, s, "told-by-nats", api.VersionStreamSpec{TargetVersion: "4.16"})
	quiet := createStream(t, s, "never-told", api.VersionStreamSpec{TargetVersion: "4.16"})
	seq := int64(1000)
	event := func(typ string, stream *api.VersionStream, generation int64) api.WatchEvent {
		seq++
		return api.WatchEvent{Seq: seq, Type: api.WatchEventType(typ), Kind: "VersionStream", Id: stream.Id, Generation: generation,
			ResourceVersion: "1", Time: time.Now().UTC()}
	}
	publishEvent(t, js, prefix, event("created", later, 1))
	eventually(t, "the announced stream reconciled", func() bool { return reportedAt(t, s, *later, 1) })
	consumerSettled(t, js, stream, consumer)
	cached := series("hyperfleet_adapter_cached_reports")
	require.Equal(t, 2.0, metricValue(t, runner, cached))

	// Messages that must not make the runtime reconcile: each is acknowledged, and nothing else happens (the
	// decisions are the unit test TestPendingDecidesUnfilteredEvents; here, the end-to-end path).
	tests := []struct {
		name    string
		publish func()
	}{
		{name: "a report at the generation it reported on", publish: func() { publishEvent(t, js, prefix, event("status", later, 1)) }},
		{name: "a label change", publish: func() { publishEvent(t, js, prefix, event("updated", later, 1)) }},
		{name: "the same event again", publish: func() { publishEvent(t, js, prefix, event("status", later, 1)) }},
		{name: "not a WatchEvent", publish: func() { publishRaw(t, js, prefix+".versionstream.created", "not json") }},
		{name: "another kind on this kind's subject", publish: func() {
			e := event("created", later, 1)
			e.Kind = "Cluster"
			publishTo(t, js, prefix+".versionstream.created", e)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.publish()
			consumerSettled(t, js, stream, consumer)
		})
	}

	// A status event about a resource the runtime has no report of: the API says whether it is pending (it is).
	// It comes after the messages above and is reconciled after them: by then, any reconcile they had queued
	// would have run.
	require.Zero(t, rec.count("never-told"))
	publishEvent(t, js, prefix, event("status", quiet, 1))
	eventually(t, "the stream the API says is pending reconciled", func() bool { return reportedAt(t, s, *quiet, 1) })
	require.Equal(t, 1, rec.count("told-by-nats"), "none of the messages above made it reconcile again")

	// A removed event drops the runtime's report of the resource.
	publishEvent(t, js, prefix, event("removed", later, 1))
	eventually(t, "the removed stream's report forgotten", func() bool { return metricValue(t, runner, cached) == 2 })
	consumerSettled(t, js, stream, consumer)

	require.Equal(t, 1.0, metricValue(t, runner, series("hyperfleet_adapter_polls_total", "kind=VersionStream", "result=success")),
		"the first poll only: the messages did the rest")
	require.GreaterOrEqual(t, metricValue(t, runner, series("hyperfleet_adapter_events_received_total", "kind=VersionStream", "source=nats", "type=status")), 3.0)
	require.Equal(t, float64(seq), metricValue(t, runner, series("hyperfleet_adapter_feed_position", "kind=VersionStream", "source=nats")))
}

// The NATS source on the API's own relay: a create and a spec change reach the runtime through JetStream, a
// stream's spec change wakes the clusters that name it, and a removed cluster is forgotten.
func TestNATSSourceFollowsTheAPIsRelay(t *testing.T) {
	js := jetStream(t)
	stream, prefix := natsNames(t)
	deleteStreamAtEnd(t, js, stream) // the relay creates it
	s := startServerOn(t, harness.NewDatabase(t), server.Config{RequiredAdapters: map[string][]string{"versionstream": {testAdapter}},
		EventsNATSURL: natsURL, EventsNATSStream: stream, EventsNATSSubjectPrefix: prefix})
	streams, clusters := newTally(), newTally()
	runner := startControllers(t, s, []adapter.Controller{
		{Kind: adapter.VersionStreams(), Reconciler: streams},
		{Kind: adapter.Clusters(), Reconciler: clusters, Dependents: []adapter.Dependents{{Kind: adapter.VersionStreams(), Field: "version_stream"}}},
	}, noPoll, fromNATS(stream, prefix))
	eventually(t, "the default stream reconciled by the first poll", func() bool { return streams.count(defaultStream) == 1 })
	for _, kind := range []*adapter.Kind{adapter.VersionStreams(), adapter.Clusters()} {
		eventually(t, "the consumer of "+kind.Name, func() bool {
			_, err := js.Consumer(ctxFor(t), stream, adapter.ConsumerName(testAdapter, kind, 0, 1))
			return err == nil
		})
	}

	relayed := createStream(t, s, "relayed", api.VersionStreamSpec{TargetVersion: "4.16"})
	eventually(t, "the new stream reconciled", func() bool { return reportedAt(t, s, *relayed, 1) })
	cluster := createClusterOn(t, s, "on-relayed", "relayed")
	eventually(t, "the new cluster reconciled", func() bool { return clusters.count("on-relayed") == 1 })
	eventually(t, "the stream known as a reference", func() bool {
		_, ok := runner.Referenced(adapter.VersionStreams(), "relayed")
		return ok
	})

	patchStream(t, s, *relayed, `{"spec":{"channel_group":"fast"}}`)
	eventually(t, "the stream's generation 2 reconciled", func() bool { return reportedAt(t, s, *relayed, 2) })
	eventually(t, "the cluster naming the stream woken", func() bool { return clusters.count("on-relayed") == 2 })

	cached := series("hyperfleet_adapter_cached_reports")
	require.Equal(t, 3.0, metricValue(t, runner, cached), "two streams and the cluster")
	del, err := s.DeleteClusterWithResponse(ctxFor(t), cluster.Id)
	require.NoError(t, err)
	require.Contains(t, []int{http.StatusAccepted, http.StatusNoContent}, del.StatusCode(), "body: %s", del.Body)
	eventually(t, "the removed cluster forgotten", func() bool { return metricValue(t, runner, cached) == 2 })

	for _, kind := range []string{"VersionStream", "Cluster"} {
		require.Equal(t, 1.0, metricValue(t, runner, series("hyperfleet_adapter_polls_total", "kind="+kind, "result=success")),
			"%s: the first poll only", kind)
	}
	require.GreaterOrEqual(t, metricValue(t, runner, series("hyperfleet_adapter_events_received_total", "kind=Cluster", "source=nats", "type=removed")), 1.0)
}

// A runtime that starts before the relay's stream exists polls meanwhile; once its consumer can be created, it lists
// what happened before (a new consumer starts at the present), so nothing waits for the safety-net poll.
func TestNATSSourceListsWhenItsConsumerComesLate(t *testing.T) {
	js := jetStream(t)
	stream, prefix := natsNames(t)
	s := startServerWith(t, map[string][]string{"versionstream": {testAdapter}})
	rec := newTally()
	runner := startRuntime(t, s, rec, noPoll, fromNATS(stream, prefix))
	eventually(t, "the default stream reconciled by the first poll", func() bool { return rec.count(defaultStream) == 1 })
	early := createStream(t, s, "before-the-consumer", api.VersionStreamSpec{TargetVersion: "4.16"})

	_, err := js.CreateStream(ctxFor(t), jetstream.StreamConfig{Name: stream, Subjects: []string{prefix + ".>"}, Storage: jetstream.MemoryStorage})
	require.NoError(t, err)
	deleteStreamAtEnd(t, js, stream)
	eventually(t, "the stream created before the consumer reconciled", func() bool { return reportedAt(t, s, *early, 1) })
	require.GreaterOrEqual(t, metricValue(t, runner, series("hyperfleet_adapter_relists_total", "kind=VersionStream", "reason=failed")), 1.0)
}
