package server

import (
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hyperfleet/hyperfleet/internal/postgres"
)

// newHistoryPruner returns the pruner of the resources' history for cfg.HistoryRetention, or nil when the history
// is kept forever. Every replica runs one; a lease lets one prune at a time.
func newHistoryPruner(cfg Config, pool *pgxpool.Pool, log *slog.Logger, reg prometheus.Registerer) (*postgres.HistoryPruner, error) {
	if cfg.HistoryRetention <= 0 {
		log.Info("the resources' history is kept forever (--history-retention=0)")
		return nil, nil
	}
	return postgres.NewHistoryPruner(postgres.HistoryPrunerConfig{Pool: pool, Retention: cfg.HistoryRetention,
		Every: cfg.HistoryPruneEvery, LeaseTTL: cfg.EventsLeaseTTL, Log: log, Registerer: reg})
}
