// Package eventrelay copies the change feed to NATS JetStream, so that many adapter replicas can consume it
// through durable consumers instead of each holding a watch on every API replica.
//
// The relay follows the committed, sequenced events (never the writes themselves), publishes each with its
// position (<epoch>.<seq>, the watch's event id) as the JetStream message id, and records how far it got only after JetStream acknowledged: a relay
// that dies between publishing and recording publishes again from the record, and JetStream's duplicate window
// drops what it already has. Delivery is therefore exactly once per sequence within the window (2 minutes by
// default) and at least once beyond it, in sequence order, which keeps the order of each resource's changes. The
// epoch in the id keeps a feed restored or failed over (which hands sequence numbers out again) from having its
// new events dropped as duplicates of the old ones.
package eventrelay

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hyperfleet/hyperfleet/internal/httpapi"
	"github.com/hyperfleet/hyperfleet/internal/resource"
	"github.com/hyperfleet/hyperfleet/pkg/natsauth"
)

// Defaults of Config.
const (
	DefaultStream        = "HYPERFLEET"
	DefaultSubjectPrefix = "hyperfleet"
	DefaultDuplicates    = 2 * time.Minute
	batch                = 500
)

// Feed is the change feed the relay follows (feed.Feed).
type Feed interface {
	Head() resource.Position
	Next(ctx context.Context, after resource.Position, limit int) ([]resource.Event, error)
}

// Positions stores how far each relay got (postgres.Store).
type Positions interface {
	RelayPosition(ctx context.Context, name string) (int64, error)
	SetRelayPosition(ctx context.Context, name string, seq int64) error
	// CompactedThrough is where retention has removed events up to: a relay behind it goes on from there.
	CompactedThrough(ctx context.Context) (int64, error)
}

// Leadership runs fn while this process holds the relay's lock, so that one relay publishes at a time and the
// stream receives the feed in order (postgres.Leader).
type Leadership interface {
	Lead(ctx context.Context, fn func(ctx context.Context) error) error
}

// Config says where to relay.
type Config struct {
	URL           string
	Stream        string        // default DefaultStream
	SubjectPrefix string        // subjects are <prefix>.<kind>.<type>; default DefaultSubjectPrefix
	Duplicates    time.Duration // JetStream's duplicate window; default DefaultDuplicates
	// Auth is the connection's authentication and TLS.
	Auth       natsauth.Settings
	Log        *slog.Logger
	Registerer prometheus.Registerer
}

// Relay copies the feed to JetStream.
type Relay struct {
	cfg       Config
	feed      Feed
	positions Positions
	leader    Leadership
	relayed   prometheus.Counter
	position  prometheus.Gauge
	lag       prometheus.Histogram
	leading   prometheus.Gauge
}

// New returns a relay; Run runs it.
func New(cfg Config, feed Feed, positions Positions, leader Leadership) (*Relay, error) {
	cfg.Stream = cmp.Or(cfg.Stream, DefaultStream)
	cfg.SubjectPrefix = cmp.Or(cfg.SubjectPrefix, DefaultSubjectPrefix)
	cfg.Duplicates = cmp.Or(cfg.Duplicates, DefaultDuplicates)
	if err := cfg.Auth.Check(); err != nil {
		return nil, fmt.Errorf("relay: %w", err)
	}
	r := &Relay{cfg: cfg, feed: feed, positions: positions, leader: leader,
		relayed: prometheus.NewCounter(prometheus.CounterOpts{Name: "hyperfleet_events_relayed_total",
			Help: "Change feed events this process published to NATS JetStream and had acknowledged."}),
		position: prometheus.NewGauge(prometheus.GaugeOpts{Name: "hyperfleet_events_relay_position",
			Help: "The last sequence this process's relay had acknowledged by JetStream."}),
		lag: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "hyperfleet_events_relay_lag_seconds",
			Help:    "Time from an event's commit to JetStream's acknowledgement of it.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}}),
		leading: prometheus.NewGauge(prometheus.GaugeOpts{Name: "hyperfleet_events_relay_leader",
			Help: "1 while this process's relay holds the relay's lease and is connected to JetStream with its stream ready."}),
	}
	if cfg.Registerer != nil {
		for _, c := range []prometheus.Collector{r.relayed, r.position, r.lag, r.leading} {
			if err := cfg.Registerer.Register(c); err != nil {
				return nil, fmt.Errorf("register relay metrics: %w", err)
			}
		}
	}
	return r, nil
}

// Name is the relay's name in the positions table.
func (r *Relay) Name() string { return "nats:" + r.cfg.Stream }

// Run relays until ctx ends, retrying (a lost lock, NATS down) with a pause.
func (r *Relay) Run(ctx context.Context) error {
	for ctx.Err() == nil {
		err := r.leader.Lead(ctx, r.relay)
		if err != nil && ctx.Err() == nil {
			r.cfg.Log.Warn("event relay to NATS stopped; retrying", "error", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(2 * time.Second):
		}
	}
	return nil
}

// relay connects, makes sure the stream exists and publishes from the recorded position on.
func (r *Relay) relay(ctx context.Context) error {
	opts, err := r.cfg.Auth.Options()
	if err != nil {
		return err
	}
	nc, err := nats.Connect(r.cfg.URL, append(opts, nats.Name("hyperfleet-api event relay"), nats.MaxReconnects(-1))...)
	if err != nil {
		return fmt.Errorf("connect to NATS at %s: %w", r.cfg.URL, err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return fmt.Errorf("JetStream: %w", err)
	}
	_, err = js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: r.cfg.Stream, Subjects: []string{r.cfg.SubjectPrefix + ".>"},
		Duplicates: r.cfg.Duplicates, Storage: jetstream.FileStorage})
	if err != nil {
		return fmt.Errorf("create or update stream %s: %w", r.cfg.Stream, err)
	}
	// Leading only counts once it can publish: a lease held while NATS is unreachable relays nothing, and the
	// alert on no leader should say so.
	r.leading.Set(1)
	defer r.leading.Set(0)
	// The recorded position is the database's, so of the epoch the database has now: after a restore, the
	// record is restored with the events.
	seq, err := r.positions.RelayPosition(ctx, r.Name())
	if err != nil {
		return err
	}
	pos := resource.Position{Epoch: r.feed.Head().Epoch, Seq: seq}
	r.cfg.Log.Info("relaying the change feed to NATS JetStream", "url", r.cfg.URL, "stream", r.cfg.Stream, "epoch", pos.Epoch, "after", pos.Seq)
	for {
		events, err := r.feed.Next(ctx, pos, batch)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if errors.Is(err, resource.ErrOtherEpoch) || !errors.Is(err, resource.ErrExpired) {
				// A new epoch (or a feed that has not seen it yet): start again from the record.
				return err
			}
			// Retention removed events the relay never published (it was down longer than --events-retention):
			// say so loudly, and go on from what is left.
			through, err := r.positions.CompactedThrough(ctx)
			if err != nil {
				return err
			}
			r.cfg.Log.Error("the change feed removed events before they were relayed; JetStream misses them",
				"after", pos.Seq, "resuming_after", through)
			pos.Seq = through
			continue
		}
		if err := r.publish(ctx, js, pos.Epoch, events); err != nil {
			return err
		}
		pos.Seq = events[len(events)-1].Seq
		if err := r.positions.SetRelayPosition(ctx, r.Name(), pos.Seq); err != nil {
			return err
		}
		r.position.Set(float64(pos.Seq))
	}
}

// MsgID is the JetStream message id of the event numbered seq in the feed's epoch: its position as a watch spells
// it, "<epoch>.<seq>".
func MsgID(epoch string, seq int64) string { return epoch + "." + strconv.FormatInt(seq, 10) }

// TenantHeader is the message header that names the tenant of the resource an event is about.
const TenantHeader = "Hyperfleet-Tenant"

// Subject returns the subject of an event of kind and type under prefix: <prefix>.<kind in lower case>.<type>.
func Subject(prefix, kind string, t resource.EventType) string {
	return prefix + "." + strings.ToLower(kind) + "." + string(t)
}

// publish sends a batch asynchronously and waits for every acknowledgement: one connection keeps them in order.
func (r *Relay) publish(ctx context.Context, js jetstream.JetStream, epoch string, events []resource.Event) error {
	futures := make([]jetstream.PubAckFuture, 0, len(events))
	for i := range events {
		e := &events[i]
		// The event without the resource: consumers read that from the API.
		wire, err := httpapi.WatchEvent(*e)
		if err != nil {
			return err
		}
		data, err := json.Marshal(wire)
		if err != nil {
			return fmt.Errorf("encode event %d: %w", e.Seq, err)
		}
		msg := nats.NewMsg(Subject(r.cfg.SubjectPrefix, e.Kind, e.Type))
		msg.Data = data
		// The tenant rides as a header, not in the subject: tenant names need not be subject tokens, and every
		// consumer of the stream (adapters) sees all tenants. A consumer confined to one filters on it.
		msg.Header.Set(TenantHeader, e.Tenant)
		f, err := js.PublishMsgAsync(msg, jetstream.WithMsgID(MsgID(epoch, e.Seq)))
		if err != nil {
			return fmt.Errorf("publish event %d: %w", e.Seq, err)
		}
		futures = append(futures, f)
	}
	timeout := time.NewTimer(30 * time.Second)
	defer timeout.Stop()
	for i, f := range futures {
		select {
		case <-f.Ok():
			r.relayed.Inc()
			r.lag.Observe(time.Since(events[i].Time).Seconds())
		case err := <-f.Err():
			return fmt.Errorf("JetStream refused event %d: %w", events[i].Seq, err)
		case <-timeout.C:
			return fmt.Errorf("JetStream did not acknowledge event %d within 30 s", events[i].Seq)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return nil
}
