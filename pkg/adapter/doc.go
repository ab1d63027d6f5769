// Package adapter is the shared runtime of HyperFleet's adapters (directory adapters/runtime; the package is
// not called runtime so as not to shadow the standard library's).
//
// An adapter author writes a Reconciler. The runtime does the rest: it lists the resources the adapter must look
// at (`pending_for`, `resync_after`) and follows hyperfleet-api's change feed for more (a watch, or its relay to
// NATS JetStream; Config.Source), with a slow poll as the safety net; it feeds their keys through a work queue that
// never hands one key to two workers, coalesces duplicates and backs off per key with jitter, fetches each
// resource fresh (or takes it from the watch event that queued it) before calling Reconcile or (for a deleting
// one) Finalize, and always reports the outcome of each reconcile, also when the reconciler fails or panics, so
// that nothing waits forever on a silent adapter: one status post, unless the report would say what the last one
// said less than Config.ReportHeartbeat ago. A resource whose spec says "paused": true is not reconciled: the runtime repeats the adapter's last
// report at the current generation with Applied=False and Paused=True (see Paused).
//
// Around that it serves /healthz (liveness: its own loops turn), /readyz (readiness: work listed, the API and the
// external system reachable, the adapter's checks pass; see Runner.AddReadinessCheck) and Prometheus /metrics,
// so an outage makes replicas unready and never restarts them. It logs JSON with slog, splits the fleet between
// replicas by a hash of the resource id (--shard-index, --shard-count, or shards leased from the API with
// --shard-leases, which move when a replica is lost: docs/shard-leases.md), reads its bearer token from a file that
// may be rotated, and drains in-flight work on SIGTERM.
package adapter
