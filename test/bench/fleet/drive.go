package main

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// selfRequestID starts the request id of every request of this program, by which the API's log tells them.
const selfRequestID = "fleet-bench-"

// poolName is every cluster's node pool (node pool names are unique per cluster), which the counts search for.
const poolName = "fleetpool"

// fleetClient is the API as this program uses it.
type fleetClient struct {
	*api.Client
	kinds *api.KindTable
}

func newFleetClient(cfg config, token string) (*fleetClient, error) {
	transport := &http.Transport{MaxIdleConnsPerHost: cfg.concurrency * 2, MaxConnsPerHost: cfg.concurrency * 2}
	var seq atomic.Int64
	c, err := api.NewClient(cfg.url, api.WithHTTPClient(&http.Client{Transport: transport, Timeout: time.Minute}),
		api.WithRequestEditorFn(func(_ context.Context, r *http.Request) error {
			r.Header.Set("Authorization", "Bearer "+token)
			r.Header.Set("X-Request-Id", selfRequestID+strconv.FormatInt(seq.Add(1), 10))
			return nil
		}))
	if err != nil {
		return nil, fmt.Errorf("client for %s: %w", cfg.url, err)
	}
	return &fleetClient{Client: c, kinds: api.Kinds()}, nil
}

// times are when each stage of the loop ended, from the first create.
type times struct {
	created, clustersReady, poolsReady time.Duration
	deleted, gone                      time.Duration
}

// lifecycle creates the clusters and their pools at once, waits until all are Ready, deletes every cluster (its
// pool goes with it) and waits until none is left, even soft-deleted.
func lifecycle(ctx context.Context, cfg config, c *fleetClient) (times, error) {
	var t times
	ids := make([]uuid.UUID, cfg.clusters)
	start := time.Now()
	err := each(ctx, cfg.clusters, cfg.concurrency, func(ctx context.Context, i int) error {
		id, err := c.create(ctx, c.kinds.Cluster, uuid.Nil, api.ResourceCreate{Name: fmt.Sprintf("%s-%d", cfg.prefix, i), Spec: map[string]any{
			"version_stream": cfg.stream, "upgrade_schedule": cfg.schedule,
			"hosted_cluster": map[string]any{"dns": map[string]any{"base_domain": "example.com"}},
		}})
		if err != nil {
			return err
		}
		ids[i] = id
		_, err = c.create(ctx, c.kinds.NodePool, id, api.ResourceCreate{Name: poolName, Spec: map[string]any{
			"replicas": cfg.replicas,
			"platform": map[string]any{"hivelocity": map[string]any{"device_type": cfg.deviceType, "region": cfg.region, "ssh_key_name": cfg.sshKey}},
		}})
		return err
	})
	if err != nil {
		return t, fmt.Errorf("create: %w", err)
	}
	t.created = time.Since(start)
	fmt.Fprintf(cfg.errs, "fleet: %d clusters and node pools created in %s\n", cfg.clusters, t.created.Round(time.Millisecond))

	clusters := fmt.Sprintf("name like '%s-%%'", cfg.prefix)
	pools := fmt.Sprintf("name = '%s'", poolName)
	ready := " and status.phase = 'Ready'"
	err = waitUntil(ctx, cfg, "Ready", func(ctx context.Context) (bool, string, error) {
		nc, err := c.count(ctx, c.kinds.Cluster, clusters+ready, false)
		if err != nil {
			return false, "", err
		}
		np, err := c.count(ctx, c.kinds.NodePool, pools+ready, false)
		if err != nil {
			return false, "", err
		}
		if nc == int64(cfg.clusters) && t.clustersReady == 0 {
			t.clustersReady = time.Since(start)
		}
		if np == int64(cfg.clusters) && t.poolsReady == 0 {
			t.poolsReady = time.Since(start)
		}
		return t.clustersReady > 0 && t.poolsReady > 0, fmt.Sprintf("clusters Ready %d/%d, node pools Ready %d/%d", nc, cfg.clusters, np, cfg.clusters), nil
	})
	if err != nil {
		return t, err
	}

	start = time.Now()
	err = each(ctx, cfg.clusters, cfg.concurrency, func(ctx context.Context, i int) error {
		resp, err := c.DeleteResource(ctx, c.kinds.Cluster, api.ResourceRef{ID: ids[i]})
		if err != nil {
			return err
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusAccepted && resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNoContent {
			return fmt.Errorf("delete cluster %s: %d", ids[i], resp.StatusCode)
		}
		return nil
	})
	if err != nil {
		return t, fmt.Errorf("delete: %w", err)
	}
	t.deleted = time.Since(start)
	fmt.Fprintf(cfg.errs, "fleet: %d clusters deleted (asked) in %s\n", cfg.clusters, t.deleted.Round(time.Millisecond))
	err = waitUntil(ctx, cfg, "gone", func(ctx context.Context) (bool, string, error) {
		nc, err := c.count(ctx, c.kinds.Cluster, clusters, true)
		if err != nil {
			return false, "", err
		}
		np, err := c.count(ctx, c.kinds.NodePool, pools, true)
		if err != nil {
			return false, "", err
		}
		return nc == 0 && np == 0, fmt.Sprintf("clusters left %d, node pools left %d", nc, np), nil
	})
	t.gone = time.Since(start)
	return t, err
}

// create creates one resource and returns its id.
func (c *fleetClient) create(ctx context.Context, kind *api.Kind, parent uuid.UUID, body api.ResourceCreate) (uuid.UUID, error) {
	a, err := api.ReadAnswer[api.Resource](c.CreateResource(ctx, kind, parent, body))
	if err != nil {
		return uuid.Nil, fmt.Errorf("create %s %s: %w", kind.Name, body.Name, err)
	}
	if a.StatusCode() != http.StatusCreated || a.JSON200 == nil {
		return uuid.Nil, fmt.Errorf("create %s %s: %d %s", kind.Name, body.Name, a.StatusCode(), a.Body)
	}
	return a.JSON200.Id, nil
}

// count returns how many resources of kind (every parent's) match search: one page of one, counted.
func (c *fleetClient) count(ctx context.Context, kind *api.Kind, search string, includeDeleted bool) (int64, error) {
	size, count := 1, true
	params := &api.ListParams{Search: &search, Size: &size, Count: &count}
	if includeDeleted {
		params.IncludeDeleted = &includeDeleted
	}
	a, err := api.ReadAnswer[api.ResourceList](c.ListResources(ctx, kind, uuid.Nil, params))
	if err != nil {
		return 0, fmt.Errorf("count %s: %w", kind.Plural, err)
	}
	if a.StatusCode() != http.StatusOK || a.JSON200 == nil || a.JSON200.Total == nil {
		return 0, fmt.Errorf("count %s: %d %s", kind.Plural, a.StatusCode(), a.Body)
	}
	return *a.JSON200.Total, nil
}

// each runs fn for 0..n-1 with at most concurrency at once; the first error stops it.
func each(ctx context.Context, n, concurrency int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(n, concurrency) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				if err := fn(ctx, i); err != nil {
					cancel(err)
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// waitUntil checks done every cfg.poll until it says so, saying how far it got every ten seconds.
func waitUntil(ctx context.Context, cfg config, what string, done func(context.Context) (bool, string, error)) error {
	tick := time.NewTicker(cfg.poll)
	defer tick.Stop()
	last := time.Now()
	for {
		ok, progress, err := done(ctx)
		if err != nil {
			return err
		}
		if ok {
			fmt.Fprintf(cfg.errs, "fleet: all %s (%s)\n", what, progress)
			return nil
		}
		if time.Since(last) >= 10*time.Second {
			fmt.Fprintf(cfg.errs, "fleet: waiting until all %s: %s\n", what, progress)
			last = time.Now()
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting until all %s: %w (%s)", what, ctx.Err(), progress)
		case <-tick.C:
		}
	}
}
