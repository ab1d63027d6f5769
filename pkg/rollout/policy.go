package rollout

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
)

// Defaults of a stream's rollout policy (spec.rollout), the same as openapi.yaml's.
const (
	DefaultProgressDeadline = time.Hour
	// DefaultStageName names the one stage of a stream without spec.rollout.stages.
	DefaultStageName = "all"
)

// Policy is a stream's spec.rollout, parsed.
type Policy struct {
	// Paused stops new starts (spec.rollout.paused).
	Paused bool
	// ProgressDeadline is how long a started cluster may take before it counts as failed.
	ProgressDeadline time.Duration
	Stages           []Stage
	// AcceptedRisks are the stream's spec.accepted_risks: accepted for every cluster of the stream.
	AcceptedRisks []string
}

// Stage is one stage of a policy.
type Stage struct {
	Name string
	// Selector picks the stage's clusters; nil for the last stage without one (it takes the rest).
	Selector  labels.Selector
	MaxAtOnce AtOnce
	Soak      time.Duration
	// MaxFailures is the failure budget: one more pauses the rollout.
	MaxFailures int
}

// AtOnce is a stage's max_at_once: a number of clusters, or a percentage of the stage's clusters.
type AtOnce struct {
	N       int
	Percent bool
}

// Of returns how many of a stage's n clusters may move at once: percentages round up, and at least one may.
func (a AtOnce) Of(n int) int {
	if !a.Percent {
		return max(1, a.N)
	}
	return max(1, int(math.Ceil(float64(n)*float64(a.N)/100)))
}

// String is the value as the spec writes it.
func (a AtOnce) String() string {
	if a.Percent {
		return strconv.Itoa(a.N) + "%"
	}
	return strconv.Itoa(a.N)
}

// streamSpec is the part of a VersionStream spec the policy reads, as stored (see openapi.yaml RolloutPolicy).
type streamSpec struct {
	AcceptedRisks []string `json:"accepted_risks"`
	Rollout       *struct {
		Paused           bool   `json:"paused"`
		ProgressDeadline string `json:"progress_deadline"`
		Stages           []struct {
			Name        string          `json:"name"`
			Selector    string          `json:"selector"`
			MaxAtOnce   json.RawMessage `json:"max_at_once"`
			Soak        string          `json:"soak"`
			MaxFailures int             `json:"max_failures"`
		} `json:"stages"`
	} `json:"rollout"`
}

// PolicyOf reads the policy of a VersionStream spec. A stream without spec.rollout has one stage that takes every
// cluster, all at once, with no soak and no failure tolerated. The API validates the spec, so an error here means
// API and reader disagree on the schema.
func PolicyOf(spec json.RawMessage) (Policy, error) {
	var s streamSpec
	if err := json.Unmarshal(spec, &s); err != nil {
		return Policy{}, fmt.Errorf("rollout policy: %w", err)
	}
	p := Policy{ProgressDeadline: DefaultProgressDeadline, AcceptedRisks: s.AcceptedRisks}
	if s.Rollout == nil || len(s.Rollout.Stages) == 0 {
		p.Stages = []Stage{{Name: DefaultStageName, MaxAtOnce: AtOnce{N: 100, Percent: true}}}
		if s.Rollout != nil {
			p.Paused = s.Rollout.Paused
		}
		err := p.readDeadline(s)
		return p, err
	}
	p.Paused = s.Rollout.Paused
	if err := p.readDeadline(s); err != nil {
		return Policy{}, err
	}
	for i, st := range s.Rollout.Stages {
		stage := Stage{Name: st.Name, MaxFailures: st.MaxFailures, MaxAtOnce: AtOnce{N: 100, Percent: true}}
		if stage.Name == "" {
			return Policy{}, fmt.Errorf("rollout stage %d has no name", i+1)
		}
		if st.Selector != "" {
			sel, err := labels.Parse(st.Selector)
			if err != nil {
				return Policy{}, fmt.Errorf("rollout stage %s: selector: %w", st.Name, err)
			}
			stage.Selector = sel
		} else if i < len(s.Rollout.Stages)-1 {
			return Policy{}, fmt.Errorf("rollout stage %s: only the last stage may omit its selector", st.Name)
		}
		if len(st.MaxAtOnce) > 0 && string(st.MaxAtOnce) != "null" {
			at, err := parseAtOnce(st.MaxAtOnce)
			if err != nil {
				return Policy{}, fmt.Errorf("rollout stage %s: max_at_once: %w", st.Name, err)
			}
			stage.MaxAtOnce = at
		}
		if st.Soak != "" {
			d, err := time.ParseDuration(st.Soak)
			if err != nil || d < 0 {
				return Policy{}, fmt.Errorf("rollout stage %s: soak %q is not a duration ≥ 0", st.Name, st.Soak)
			}
			stage.Soak = d
		}
		p.Stages = append(p.Stages, stage)
	}
	return p, nil
}

func (p *Policy) readDeadline(s streamSpec) error {
	if s.Rollout == nil || s.Rollout.ProgressDeadline == "" {
		return nil
	}
	d, err := time.ParseDuration(s.Rollout.ProgressDeadline)
	if err != nil || d <= 0 {
		return fmt.Errorf("rollout progress_deadline %q is not a positive duration", s.Rollout.ProgressDeadline)
	}
	p.ProgressDeadline = d
	return nil
}

func parseAtOnce(raw json.RawMessage) (AtOnce, error) {
	var n int
	if json.Unmarshal(raw, &n) == nil {
		if n < 1 {
			return AtOnce{}, errors.New("must be at least 1")
		}
		return AtOnce{N: n}, nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		return AtOnce{}, errors.New("must be a number or a percentage")
	}
	percent := strings.HasSuffix(s, "%")
	n, err := strconv.Atoi(strings.TrimSuffix(s, "%"))
	if err != nil || n < 1 || (percent && n > 100) {
		return AtOnce{}, fmt.Errorf("%q is not a number ≥ 1 or a percentage 1%%–100%%", s)
	}
	return AtOnce{N: n, Percent: percent}, nil
}

// StageOf returns the index of the stage a cluster with these labels belongs to: the first whose selector
// matches, else the last.
func (p *Policy) StageOf(l map[string]string) int {
	for i, st := range p.Stages[:len(p.Stages)-1] {
		if st.Selector != nil && st.Selector.Matches(labels.Set(l)) {
			return i
		}
	}
	return len(p.Stages) - 1
}

// Accepted returns the risks accepted for a cluster: its own and its stream's.
func (p *Policy) Accepted(cluster []string) map[string]bool {
	out := make(map[string]bool, len(cluster)+len(p.AcceptedRisks))
	for _, r := range p.AcceptedRisks {
		out[r] = true
	}
	for _, r := range cluster {
		out[r] = true
	}
	return out
}
