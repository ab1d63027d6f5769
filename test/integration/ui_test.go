package integration

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestSwaggerUIRendersOfflineInChromium loads /openapi-ui in headless Chromium with background networking off:
// the operations only appear in the DOM once Swagger UI's scripts have loaded from the API and rendered the
// document, so a CDN dependency or a broken asset fails it.
func TestSwaggerUIRendersOfflineInChromium(t *testing.T) {
	browser := ""
	for _, name := range []string{"chromium", "chromium-browser"} {
		if path, err := exec.LookPath(name); err == nil {
			browser = path
			break
		}
	}
	if browser == "" {
		t.Fatal("headless Chromium is needed to check the Swagger UI: apt-get install -y chromium (.ci/run installs it)")
	}
	s := startServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-quic",
		"--no-first-run", "--user-data-dir="+t.TempDir(), "--virtual-time-budget=15000", "--dump-dom",
		s.base+"/openapi-ui/").Output()
	require.NoError(t, err, "chromium: %s", out)
	dom := string(out)
	for _, rendered := range []string{`class="swagger-ui`, "HyperFleet API", "/api/hyperfleet/v1/clusters/{cluster_id}/statuses", "Create a cluster"} {
		require.True(t, strings.Contains(dom, rendered), "the rendered page lacks %q", rendered)
	}
}
