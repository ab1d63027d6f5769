package supervisor

import (
	"context"
	"fmt"
	"io"
	"net/http"
)

// HTTPProbe returns a probe that passes when GET url answers 2xx. It uses client (nil: a client of its own with
// no keep-alives, so that probing a restarted server never reuses a dead connection).
func HTTPProbe(client *http.Client, url string) Probe {
	if client == nil {
		client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	}
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
		if err != nil {
			return err
		}
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10)) //nolint:errcheck // only so that the connection can be reused
		_ = resp.Body.Close()
		if resp.StatusCode/100 != 2 {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}
}
