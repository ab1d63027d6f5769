package integration

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/hyperfleet/hyperfleet/internal/server"
	"github.com/hyperfleet/hyperfleet/pkg/api"
)

// GET /api/hyperfleet/metadata answers upstream HyperFleet's document, without a token even where every other
// request needs one, with the build the binary was stamped with; an unstamped build time is left out.
func TestMetadataIsPublicAndSaysWhatRuns(t *testing.T) {
	tests := []struct {
		name      string
		buildTime string
		want      *time.Time
	}{
		{name: "stamped", buildTime: "2026-12-05T18:10:37Z", want: new(time.Date(2026, 12, 5, 18, 10, 37, 0, time.UTC))},
		{name: "not stamped", buildTime: ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := startSecuredServer(t, func(c *server.Config) {
				c.Version, c.Build, c.BuildTime = "v1.2.3", "a1b2c3d", tt.buildTime
			})
			resp, err := s.GetMetadataWithResponse(ctxFor(t))
			require.NoError(t, err)
			require.Equal(t, http.StatusOK, resp.StatusCode(), "body: %s", resp.Body)
			require.Equal(t, "application/json", resp.HTTPResponse.Header.Get("Content-Type"))
			require.Equal(t, &api.Metadata{Service: "hyperfleet-api", Version: "v1.2.3", ApiVersions: []string{"v1"},
				GitSha: "a1b2c3d", BuildTimestamp: tt.want}, resp.JSON200)

			// The versions it names are served there.
			for _, v := range resp.JSON200.ApiVersions {
				info, err := s.http.Get(s.base + "/api/hyperfleet/" + v)
				require.NoError(t, err)
				require.NoError(t, info.Body.Close())
				require.Equal(t, http.StatusOK, info.StatusCode, v)
			}
			// Only GET.
			post, err := s.http.Post(s.base+"/api/hyperfleet/metadata", "application/json", nil)
			require.NoError(t, err)
			require.NoError(t, post.Body.Close())
			require.Equal(t, http.StatusMethodNotAllowed, post.StatusCode)
		})
	}
}
