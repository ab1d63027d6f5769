package main

import (
	"context"
	"fmt"
	"net/http"
	"os"

	"github.com/jackc/pgx/v5"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/hyperfleet/hyperfleet/cmd/hyperfleet-dev/internal/supervisor"
)

// postgresProbe passes once the database at dsn answers a query.
func postgresProbe(dsn string) supervisor.Probe {
	return func(ctx context.Context) error {
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			return err
		}
		defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
		return conn.Ping(ctx)
	}
}

// kubeProbe passes once the kubeconfig at path exists and its kube-apiserver answers /readyz: `hyperfleet-dev kube`
// writes the kubeconfig only once the CRDs are installed.
func kubeProbe(path string) supervisor.Probe {
	return func(ctx context.Context) error {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rc, err := clientcmd.RESTConfigFromKubeConfig(data)
		if err != nil {
			return fmt.Errorf("kubeconfig: %w", err)
		}
		hc, err := rest.HTTPClientFor(rc)
		if err != nil {
			return fmt.Errorf("kube client: %w", err)
		}
		defer hc.CloseIdleConnections()
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, rc.Host+"/readyz", http.NoBody)
		if err != nil {
			return err
		}
		resp, err := hc.Do(req)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("kube-apiserver /readyz: %s", resp.Status)
		}
		return nil
	}
}
