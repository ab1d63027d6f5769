package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/spf13/cobra"

	"github.com/hyperfleet/hyperfleet/internal/embeddeddb"
)

// dbConfig is what `hyperfleet-dev db` is configured with.
type dbConfig struct {
	dataDir  string
	port     uint32
	database string
}

func dbCommand() *cobra.Command {
	cfg := dbConfig{port: 5433, database: "hyperfleet"}
	cmd := &cobra.Command{
		Use:   "db",
		Short: "Run the private development PostgreSQL until interrupted",
		Long: `Runs PostgreSQL from the machine's installed server binaries on 127.0.0.1 (as the postgres user when started
as root), creating its data directory and database on first use and keeping them between runs: the database that
'hyperfleet-api serve --embedded-db' uses, as a process of its own, so that the API can be restarted (or killed)
without taking the database with it. It prints the connection URL once the server accepts connections.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
			return runDB(cmd.Context(), cfg, log)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&cfg.dataDir, "data-dir", "", "data directory (default: ~/.cache/hyperfleet/embedded-postgres; /var/cache/hyperfleet/embedded-postgres for root, as serve --embedded-db)")
	fs.Uint32Var(&cfg.port, "port", cfg.port, "port on 127.0.0.1")
	fs.StringVar(&cfg.database, "database", cfg.database, "database created on first use")
	return cmd
}

// runDB serves the database until ctx ends, then stops it with a fast shutdown.
func runDB(ctx context.Context, cfg dbConfig, log *slog.Logger) error {
	srv, err := embeddeddb.Start(ctx, embeddeddb.Config{DataDir: cfg.dataDir, Port: cfg.port, Database: cfg.database, Logger: log})
	if err != nil {
		return err
	}
	log.Info("database ready", "url", srv.DSN())
	<-ctx.Done()
	if err := srv.Stop(); err != nil {
		return fmt.Errorf("stop: %w", err)
	}
	return nil
}
