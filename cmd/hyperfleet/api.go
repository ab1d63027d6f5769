package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"

	"github.com/spf13/cobra"

	"github.com/hyperfleet/hyperfleet/pkg/api"
)

type apiOptions struct {
	data    string
	headers []string
}

const apiLong = `Sends one request to the API and prints its answer: the escape hatch for what the other commands do not do.
PATH is below the API's base path (/api/hyperfleet/v1), or absolute (/openapi); a query string is kept as given.
The request carries the server and token every command uses (--server, --token, the context). --data sends a body:
inline JSON, @FILE, or @- (or -) for stdin; its Content-Type is application/json, or
application/merge-patch+json for a PATCH, unless -H says otherwise.

A JSON answer is printed indented on stdout. An error answer is printed on stderr as the other commands print
them (the problem's code, detail and field errors), and the command exits non-zero: 3 for 404, 4 for 409 and 412,
1 for any other error.`

const apiExample = `  hyperfleet api GET /clusters?search="name='demo'"
  hyperfleet api GET /clusters/0b6a…/statuses
  hyperfleet api PATCH /clusters/0b6a… --data '{"labels": {"env": "prod"}}'
  hyperfleet api POST /versionstreams --data @stream.json
  hyperfleet api GET /openapi`

func newAPICommand(a *app) *cobra.Command {
	o := &apiOptions{}
	cmd := &cobra.Command{
		Use:     "api METHOD PATH [--data JSON|@FILE|-]",
		Short:   "Make a raw request to the API and print the answer",
		Long:    apiLong,
		Example: apiExample,
		Args:    usageArgs(cobra.ExactArgs(2)),
		ValidArgsFunction: func(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			if len(args) == 0 {
				return filterPrefix([]string{"GET", "POST", "PUT", "PATCH", "DELETE"}, strings.ToUpper(toComplete)), cobra.ShellCompDirectiveNoFileComp
			}
			return nil, cobra.ShellCompDirectiveNoFileComp
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.api(cmd, o, strings.ToUpper(args[0]), args[1])
		},
	}
	cmd.Flags().StringVarP(&o.data, "data", "d", "", "request body: JSON, @FILE, or @- / - for stdin")
	cmd.Flags().StringArrayVarP(&o.headers, "header", "H", nil, "request header, \"Name: value\" (repeatable)")
	return cmd
}

func (a *app) api(cmd *cobra.Command, o *apiOptions, method, path string) error {
	switch method {
	case http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodHead:
	default:
		return usageErrorf("method %q: want GET, POST, PUT, PATCH, DELETE or HEAD", method)
	}
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	if !strings.HasPrefix(path, "/api/") && !strings.HasPrefix(path, "/openapi") {
		path = api.BasePath + path
	}
	var body io.Reader
	if o.data != "" {
		raw, err := a.readData(o.data)
		if err != nil {
			return err
		}
		body = bytes.NewReader(raw)
	}
	c, err := a.connect()
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(cmd.Context(), method, c.server+path, body)
	if err != nil {
		return usageErrorf("%s %s: %v", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", contentJSON)
		if method == http.MethodPatch {
			req.Header.Set("Content-Type", contentMergePatch)
		}
	}
	if err := c.editor(cmd.Context(), req); err != nil {
		return err
	}
	for _, h := range o.headers {
		name, value, ok := strings.Cut(h, ":")
		if !ok || strings.TrimSpace(name) == "" {
			return usageErrorf("-H %q: want \"Name: value\"", h)
		}
		req.Header.Set(strings.TrimSpace(name), strings.TrimSpace(value))
	}
	answer, err := c.do(a.httpClient().Do(req)) //nolint:bodyclose // do closes it
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(answer)) == 0 {
		return nil
	}
	var indented bytes.Buffer
	if json.Indent(&indented, answer, "", "  ") != nil {
		_, err := a.stdout.Write(answer) // YAML (/openapi) or text: as it came
		return err
	}
	indented.WriteByte('\n')
	_, err = a.stdout.Write(indented.Bytes())
	return err
}

// readData reads --data: inline, @FILE, or stdin for "-" and "@-".
func (a *app) readData(data string) ([]byte, error) {
	switch {
	case data == "-" || data == "@-":
		return readInput("-", a.stdin)
	case strings.HasPrefix(data, "@"):
		return readInput(data[1:], a.stdin)
	}
	if !json.Valid([]byte(data)) {
		return nil, usageErrorf("--data is not JSON (use @FILE for a file)")
	}
	return []byte(data), nil
}
