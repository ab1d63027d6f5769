package adapter

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// Settings of the NATS source's consumers.
const (
	// natsBatch is how many messages one pull asks for; natsFetchWait how long it waits for them. A message is
	// handled as soon as it arrives, whatever the batch.
	natsBatch     = 100
	natsFetchWait = 10 * time.Second
	// natsAckWait is how long JetStream waits for an ack before delivering a message again: handling one is an
	// enqueue, or at most a few API reads.
	natsAckWait = 30 * time.Second
	// natsInactive removes a consumer nobody pulled from for this long (the consumers of a shard count no longer
	// in use); an adapter down for longer starts a new one at the present, and its first poll finds what it missed.
	natsInactive = time.Hour
)

// ConsumerName is the durable JetStream consumer that the replicas of adapter with --shard-index index of
// --shard-count count share for kind's events.
//
// One consumer per adapter, kind and shard: every shard must see every event of the kind (the subject does not
// say which shard a resource is in, and a 2.9 server cannot filter on more), so each shard pulls from its own
// consumer and keeps what hashes to it, acknowledging the rest. Replicas of one shard (two pods of one shard during a
// rolling update) share the consumer and split its messages, which is safe: a message is a hint to look, and a
// resource is reconciled by whichever replica takes it. Changing --shard-count starts new consumers at the present
// (each replica's first poll covers what they never saw); the old ones expire after an hour unused.
func ConsumerName(adapter string, kind *Kind, index, count int) string {
	return fmt.Sprintf("%s_%s_%dof%d", adapter, subjectToken(kind), index, count)
}

// subjectToken is kind's token in the relay's subjects, <prefix>.<kind in lower case>.<type>.
func subjectToken(kind *Kind) string { return strings.ToLower(kind.Name) }

// natsSource consumes one kind's relayed events from JetStream (SourceNATS) and hands each to the feeds that
// follow the kind (the controller's pending work and any Dependents of the kind), then acknowledges it: a message is
// acknowledged once its work is on the queue, and delivered again (after a backoff) when it could not be.
type natsSource struct {
	r     *Runner
	js    jetstream.JetStream
	kind  *Kind
	feeds []feedHandler
	log   *slog.Logger

	consumer jetstream.Consumer // nil until created, and again after it failed
	// relist is set when the consumer was created anew after a failure: what happened while there was none (or
	// before it started at the present) is what a list of each feed finds.
	relist bool
}

func newNATSSource(r *Runner, js jetstream.JetStream, kind *Kind, feeds []feedHandler) *natsSource {
	return &natsSource{r: r, js: js, kind: kind, feeds: feeds,
		log: r.log.With(slog.String("kind", kind.Name), slog.String("source", SourceNATS))}
}

// connectNATS connects to cfg.NATSURL; the connection keeps trying while the server is away, so that an adapter
// can start before NATS does (its poll works meanwhile).
func connectNATS(cfg Config, log *slog.Logger) (*nats.Conn, error) {
	auth, err := cfg.NATSAuth.Options()
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(cfg.NATSURL, append(auth, nats.Name("hyperfleet adapter "+cfg.Adapter+" ("+cfg.Replica+")"),
		nats.MaxReconnects(-1), nats.RetryOnFailedConnect(true),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				log.Warn("disconnected from NATS; reconnecting", slog.Any("error", err))
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			log.Info("reconnected to NATS", slog.String("url", nc.ConnectedUrlRedacted()))
		}))...)
	if err != nil {
		return nil, fmt.Errorf("connect to NATS at %s: %w", cfg.NATSURL, err)
	}
	return nc, nil
}

// ensure creates the durable consumer, or takes the existing one with the same settings.
func (s *natsSource) ensure(ctx context.Context) error {
	cfg := s.r.cfg
	name := ConsumerName(cfg.Adapter, s.kind, cfg.ShardIndex, cfg.ShardCount)
	c, err := s.js.CreateOrUpdateConsumer(ctx, cfg.NATSStream, jetstream.ConsumerConfig{
		Durable:     name,
		Description: fmt.Sprintf("hyperfleet adapter %s: %s events for shard %d of %d", cfg.Adapter, s.kind.Name, cfg.ShardIndex, cfg.ShardCount),
		// A new consumer starts at the present: the adapter's first poll lists what is pending already.
		DeliverPolicy:     jetstream.DeliverNewPolicy,
		FilterSubject:     cfg.NATSSubjectPrefix + "." + subjectToken(s.kind) + ".>",
		AckPolicy:         jetstream.AckExplicitPolicy,
		AckWait:           natsAckWait,
		MaxAckPending:     10 * natsBatch,
		InactiveThreshold: natsInactive,
	})
	if err != nil {
		return fmt.Errorf("JetStream consumer %s on stream %s: %w", name, cfg.NATSStream, err)
	}
	if s.consumer == nil {
		s.log.Info("consuming relayed events", slog.String("stream", cfg.NATSStream), slog.String("consumer", name))
	}
	s.consumer = c
	return nil
}

// run pulls and handles messages until ctx ends, creating the consumer again whenever pulling fails.
func (s *natsSource) run(ctx context.Context) {
	r := s.r
	failures := 0
	for ctx.Err() == nil {
		if s.consumer == nil {
			if err := s.ensure(ctx); err != nil {
				failures++
				if ctx.Err() == nil {
					s.log.Warn("cannot consume relayed events; will retry (the poll goes on meanwhile)", slog.Int("failures", failures), slog.Any("error", err))
				}
				r.sleep(ctx, r.retryDelay(failures))
				continue
			}
			s.relist = true
		}
		if s.relist {
			if err := s.list(ctx); err != nil {
				failures++
				r.sleep(ctx, r.retryDelay(failures))
				continue
			}
			s.relist = false
		}
		n, err := s.fetch(ctx)
		if ctx.Err() != nil {
			return
		}
		if err == nil && n == 0 {
			// A 2.9 server answers a pull on a consumer that was removed (inactive too long, or by an operator) with
			// silence, not an error: an idle pull makes sure the consumer is still there.
			_, err = s.consumer.Info(ctx)
		}
		if err != nil {
			failures++
			r.metrics.reconnects.WithLabelValues(SourceNATS, s.kind.Name).Inc()
			s.log.Warn("pulling relayed events failed; will retry", slog.Int("failures", failures), slog.Any("error", err))
			s.consumer = nil
			r.sleep(ctx, r.retryDelay(failures))
			continue
		}
		failures = 0
		r.contact()
	}
}

// list lists each feed of the kind, after the consumer was created anew.
func (s *natsSource) list(ctx context.Context) error {
	for _, f := range s.feeds {
		if _, err := f.list(ctx); err != nil {
			if ctx.Err() == nil {
				s.log.Warn("listing after the consumer was created failed; will retry", slog.Any("error", err))
			}
			return err
		}
		s.r.metrics.relists.WithLabelValues(s.kind.Name, relistFailed).Inc()
	}
	return nil
}

// fetch pulls one batch, handling each message as it arrives, and returns how many came.
func (s *natsSource) fetch(ctx context.Context) (int, error) {
	pullCtx, cancel := context.WithTimeout(ctx, natsFetchWait)
	defer cancel()
	batch, err := s.consumer.Fetch(natsBatch, jetstream.FetchContext(pullCtx))
	if err != nil {
		return 0, err
	}
	n := 0
	for msg := range batch.Messages() {
		n++
		s.deliver(ctx, msg)
	}
	if err := batch.Error(); err != nil && !errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, context.Canceled) &&
		!errors.Is(err, nats.ErrTimeout) {
		return n, err
	}
	return n, nil
}

// deliver hands one message to the kind's feeds and acknowledges it, or asks for it again later.
func (s *natsSource) deliver(ctx context.Context, msg jetstream.Msg) {
	var e api.WatchEvent
	if err := json.Unmarshal(msg.Data(), &e); err != nil || e.Kind != s.kind.Name {
		// Nothing will make it readable: terminate it rather than have it delivered forever.
		s.log.Error("a relayed message is not a WatchEvent of the kind; dropped", slog.String("subject", msg.Subject()),
			slog.String("kind_in_message", e.Kind), slog.Any("error", err))
		s.settle(msg, msg.Term(), "term")
		return
	}
	s.r.received(SourceNATS, s.kind, &e)
	for _, f := range s.feeds {
		err := f.handle(ctx, &feedEvent{WatchEvent: e})
		if err == nil {
			continue
		}
		attempts := 1
		if md, mdErr := msg.Metadata(); mdErr == nil {
			attempts = int(min(md.NumDelivered, 62)) //nolint:gosec // bounded above
		}
		delay := s.r.retryDelay(attempts)
		if ctx.Err() == nil {
			s.log.Warn("a relayed event could not be handled; it will come again", slog.Int64("seq", e.Seq), slog.String("type", string(e.Type)),
				slog.String("id", e.Id.String()), slog.Duration("after", delay), slog.Any("error", err))
		}
		s.settle(msg, msg.NakWithDelay(delay), "nak")
		return
	}
	s.settle(msg, msg.Ack(), "ack")
}

// settle logs a failed ack, nak or term. Nothing more is needed: JetStream delivers the message again after the
// ack wait, and handling it again is harmless, since handling is an enqueue.
func (s *natsSource) settle(msg jetstream.Msg, err error, what string) {
	if err != nil {
		s.log.Debug(what+" failed; the message will come again", slog.String("subject", msg.Subject()), slog.Any("error", err))
	}
}
