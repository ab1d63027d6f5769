package deploy

import (
	"bytes"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// The alert rules ship twice: as a plain Prometheus rules file with its promtool tests, and as the PrometheusRule
// of the kustomize base.
var (
	alertRulesFile = filepath.Join(deployDir, "alerts", "hyperfleet.rules.yaml")
	alertTestsFile = filepath.Join(deployDir, "alerts", "hyperfleet.rules.test.yaml")
	deployReadme   = filepath.Join(deployDir, "README.md")
)

// ruleGroups is a rules file's groups, as far as these tests read them.
type ruleGroups struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []struct {
			Alert string `json:"alert"`
			Expr  string `json:"expr"`
		} `json:"rules"`
	} `json:"groups"`
}

// alerts returns the rules file's alerts, in order, with their expressions.
func alerts(tb testing.TB) (names []string, exprs map[string]string) {
	tb.Helper()
	raw, err := os.ReadFile(alertRulesFile)
	require.NoError(tb, err)
	var g ruleGroups
	require.NoError(tb, yaml.Unmarshal(raw, &g), "%s", alertRulesFile)
	exprs = map[string]string{}
	for _, group := range g.Groups {
		for _, r := range group.Rules {
			require.NotEmpty(tb, r.Alert, "group %s: every rule is an alert", group.Name)
			require.NotContains(tb, exprs, r.Alert, "alert %s is defined twice", r.Alert)
			names = append(names, r.Alert)
			exprs[r.Alert] = r.Expr
		}
	}
	require.NotEmpty(tb, names)
	return names, exprs
}

// TestAlertRulesShipTwiceTheSame checks that the PrometheusRule the kustomize base renders holds exactly the groups
// of the plain rules file.
func TestAlertRulesShipTwiceTheSame(t *testing.T) {
	raw, err := os.ReadFile(alertRulesFile)
	require.NoError(t, err)
	var plain map[string]any
	require.NoError(t, yaml.Unmarshal(raw, &plain))

	var rules []*unstructured.Unstructured
	for _, obj := range render(t, filepath.Join(deployDir, "hyperfleet")) {
		if obj.GetKind() == "PrometheusRule" {
			rules = append(rules, obj)
		}
	}
	require.Len(t, rules, 1, "deploy/hyperfleet renders one PrometheusRule")
	groups, found, err := unstructured.NestedFieldNoCopy(rules[0].Object, "spec", "groups")
	require.NoError(t, err)
	require.True(t, found, "the PrometheusRule has spec.groups")
	require.Equal(t, plain["groups"], groups,
		"deploy/hyperfleet/alerts/prometheusrule.yaml's spec.groups differ from deploy/alerts/hyperfleet.rules.yaml's groups: change both alike")
	require.Len(t, plain, 1, "the plain rules file holds groups and nothing else")
}

// promtool returns the path of promtool, or fails saying how to get it.
func promtool(tb testing.TB) string {
	tb.Helper()
	path, err := exec.LookPath("promtool")
	if err != nil {
		tb.Fatalf("promtool is not on PATH, and the alert rules are tested with it: `make test-prereqs` installs it as root " +
			"(Debian's prometheus package ships it); otherwise run: sudo apt-get install -y prometheus")
	}
	return path
}

// TestAlertRulesPassPromtool checks the rules as Prometheus would load them, then runs their unit tests: every
// alert's firing and quiet cases.
func TestAlertRulesPassPromtool(t *testing.T) {
	bin := promtool(t)
	tests := []struct {
		name string
		args []string
	}{
		{name: "check rules", args: []string{"check", "rules", filepath.Base(alertRulesFile)}},
		{name: "test rules", args: []string{"test", "rules", filepath.Base(alertTestsFile)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			cmd := exec.CommandContext(t.Context(), bin, tt.args...)
			cmd.Dir = filepath.Dir(alertRulesFile)
			cmd.Stdout, cmd.Stderr = &out, &out
			require.NoError(t, cmd.Run(), "promtool %s:\n%s", strings.Join(tt.args, " "), out.String())
			require.Contains(t, out.String(), "SUCCESS")
		})
	}
}

// TestAlertRulesAreEachTestedBothWays checks that the promtool tests evaluate every alert at least once where it
// fires and once where it does not, and name no alert the rules lack.
func TestAlertRulesAreEachTestedBothWays(t *testing.T) {
	names, _ := alerts(t)
	raw, err := os.ReadFile(alertTestsFile)
	require.NoError(t, err)
	var file struct {
		RuleFiles []string `json:"rule_files"`
		Tests     []struct {
			AlertRuleTest []struct {
				AlertName string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	require.NoError(t, yaml.Unmarshal(raw, &file))
	require.Equal(t, []string{filepath.Base(alertRulesFile)}, file.RuleFiles)
	firing, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range file.Tests {
		for _, a := range tc.AlertRuleTest {
			require.Contains(t, names, a.AlertName, "%s tests an alert the rules do not have", alertTestsFile)
			if len(a.ExpAlerts) > 0 {
				firing[a.AlertName] = true
			} else {
				quiet[a.AlertName] = true
			}
		}
	}
	for _, name := range names {
		require.True(t, firing[name], "no test of %s in %s expects it to fire", name, alertTestsFile)
		require.True(t, quiet[name], "no test of %s in %s expects it quiet", name, alertTestsFile)
	}
}

// TestAlertRulesAreDocumented checks that deploy/README.md's "Alerts" section has a heading for each alert, and for
// no alert the rules lack.
func TestAlertRulesAreDocumented(t *testing.T) {
	names, _ := alerts(t)
	raw, err := os.ReadFile(deployReadme)
	require.NoError(t, err)
	doc := string(raw)
	start := strings.Index(doc, "\n## Alerts\n")
	require.NotEqual(t, -1, start, "deploy/README.md has no section \"## Alerts\"")
	section := doc[start+1:]
	if end := strings.Index(section[1:], "\n## "); end != -1 {
		section = section[:end+1]
	}
	var documented []string
	for _, m := range regexp.MustCompile("(?m)^### `([A-Za-z]+)`").FindAllStringSubmatch(section, -1) {
		documented = append(documented, m[1])
	}
	require.ElementsMatch(t, names, documented, "the alerts of %s against the headings of deploy/README.md's Alerts section", alertRulesFile)
}

// ownMetric is a series name of HyperFleet's own in a rule's expression; a histogram's is its family's name and a
// suffix.
var ownMetric = regexp.MustCompile(`\bhyperfleet_[a-z0-9_]+`)

// TestAlertRulesNameMetricsThatExist checks that every metric of HyperFleet's own that a rule reads is registered
// somewhere in the code (its name as a Go string literal outside tests): a renamed metric would otherwise leave an
// alert that can never fire.
func TestAlertRulesNameMetricsThatExist(t *testing.T) {
	root := filepath.Join(deployDir, "..")
	var code bytes.Buffer
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "bin") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		raw, err := os.ReadFile(path)
		code.Write(raw)
		return err
	})
	require.NoError(t, err)
	names, exprs := alerts(t)
	for _, name := range names {
		for _, metric := range ownMetric.FindAllString(exprs[name], -1) {
			family := metric
			for _, suffix := range []string{"_bucket", "_count", "_sum"} {
				if trimmed, ok := strings.CutSuffix(metric, suffix); ok && bytes.Contains(code.Bytes(), []byte(`"`+trimmed+`"`)) {
					family = trimmed
				}
			}
			require.True(t, bytes.Contains(code.Bytes(), []byte(`"`+family+`"`)),
				"alert %s reads %s, which no code registers", name, metric)
		}
	}
}

// jobMatcher finds the scrape jobs and pods a rule names: job="x", job=~"a|b", pod=~"(a|b)-.+".
var jobMatcher = regexp.MustCompile(`(job|pod)(=~?)"\(?([a-z0-9|-]+)\)?(?:-\.\+)?"`)

// TestAlertRulesKnowTheDeployedJobs checks that the job and pod names the rules match are the ServiceMonitors'
// Services (the job label the Prometheus Operator gives their targets) and workloads: the API's, and every
// adapter's where a rule matches adapters.
func TestAlertRulesKnowTheDeployedJobs(t *testing.T) {
	var api, adapters []string
	for _, obj := range render(t, deployDir) {
		if obj.GetKind() != "ServiceMonitor" {
			continue
		}
		service, _, _ := unstructured.NestedString(obj.Object, "spec", "selector", "matchLabels", "app.kubernetes.io/name")
		require.NotEmpty(t, service, "ServiceMonitor %s selects its Service by name", obj.GetName())
		switch obj.GetLabels()["app.kubernetes.io/component"] {
		case "api":
			api = append(api, service)
		case "adapter":
			adapters = append(adapters, service)
		}
	}
	require.Len(t, api, 1)
	require.NotEmpty(t, adapters)
	slices.Sort(adapters)
	names, exprs := alerts(t)
	matched := map[string]int{}
	for _, name := range names {
		for _, m := range jobMatcher.FindAllStringSubmatch(exprs[name], -1) {
			values := strings.Split(m[3], "|")
			slices.Sort(values)
			matched[m[2]]++
			if m[2] == "=" {
				require.Equal(t, api, values, "alert %s: %s", name, m[0])
				continue
			}
			require.Equal(t, adapters, values, "alert %s matches the adapters: %s", name, m[0])
		}
	}
	require.Positive(t, matched["="], "some rule names the API's job")
	require.Positive(t, matched["=~"], "some rule matches the adapters' jobs or pods")
}
