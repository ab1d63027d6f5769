package kinds

import (
	"encoding/json"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/hyperfleet/hyperfleet/internal/resource"
)

// versionStreamRules checks the stream's rollout policy as the version resolver will read it: stage names are
// unique, every selector parses as a Kubernetes label selector, every stage but the last has one (the last takes
// the clusters no stage matched), and the durations parse, the progress deadline above zero. The schema has
// already checked the shapes and the patterns.
func versionStreamRules(spec map[string]any) []resource.FieldError {
	var in struct {
		Rollout *struct {
			ProgressDeadline *string `json:"progress_deadline"`
			Stages           []struct {
				Name     string  `json:"name"`
				Selector *string `json:"selector"`
				Soak     *string `json:"soak"`
			} `json:"stages"`
		} `json:"rollout"`
	}
	raw, err := json.Marshal(spec)
	if err == nil {
		err = json.Unmarshal(raw, &in)
	}
	if err != nil {
		return []resource.FieldError{{Field: "", Message: "cannot be read as a version stream: " + err.Error()}}
	}
	if in.Rollout == nil {
		return nil
	}
	var problems []resource.FieldError
	add := func(field, msg string) {
		problems = append(problems, resource.FieldError{Field: "rollout." + field, Message: msg})
	}
	if p := in.Rollout.ProgressDeadline; p != nil {
		if d, err := time.ParseDuration(*p); err != nil || d <= 0 {
			add("progress_deadline", "must be a Go duration greater than zero, e.g. 45m")
		}
	}
	seen := map[string]int{}
	last := len(in.Rollout.Stages) - 1
	for i, st := range in.Rollout.Stages {
		field := fmt.Sprintf("stages[%d]", i)
		if first, ok := seen[st.Name]; ok {
			add(field+".name", fmt.Sprintf("%q is the name of stage %d too: stage names are unique", st.Name, first))
		} else {
			seen[st.Name] = i
		}
		switch {
		case st.Selector == nil || *st.Selector == "":
			if i != last {
				add(field+".selector", "is required on every stage but the last, which takes the clusters no stage matched")
			}
		default:
			if _, err := labels.Parse(*st.Selector); err != nil {
				add(field+".selector", "is not a label selector: "+err.Error())
			}
		}
		if st.Soak != nil {
			if d, err := time.ParseDuration(*st.Soak); err != nil || d < 0 {
				add(field+".soak", "must be a Go duration of zero or more, e.g. 30m")
			}
		}
	}
	return problems
}
