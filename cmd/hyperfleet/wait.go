package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/hyperfleet/hyperfleet/pkg/api"
	"github.com/hyperfleet/hyperfleet/pkg/conditions"
)

type waitOptions struct {
	cluster, forArg   string
	timeout, interval time.Duration
}

const waitLong = `Waits until a resource reaches a phase (--for=phase=Ready), has a condition (--for=condition=Available,
or condition=Ready=False for another status), or is gone (--for=delete). A progress line on stderr shows the
phase, the conditions that are not True yet and the time waited. It exits 1 when --timeout passes first.`

func newWaitCommand(a *app) *cobra.Command {
	o := &waitOptions{}
	cmd := &cobra.Command{
		Use:               "wait KIND NAME --for=phase=Ready|condition=TYPE[=STATUS]|delete",
		Short:             "Wait for a phase, a condition or a deletion, with a progress line",
		Long:              waitLong,
		Example:           "  hyperfleet wait cluster demo --for=phase=Ready --timeout 10m\n  hyperfleet wait np workers --cluster demo --for=condition=Available\n  hyperfleet wait cluster demo --for=delete",
		Args:              usageArgs(cobra.ExactArgs(2)),
		ValidArgsFunction: a.completeKindAndNames,
		RunE: func(cmd *cobra.Command, args []string) error {
			return a.wait(cmd.Context(), o, args)
		},
	}
	fs := cmd.Flags()
	fs.StringVar(&o.forArg, "for", "phase=Ready", "phase=PHASE, condition=TYPE[=STATUS] or delete")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Minute, "how long to wait (0: no limit)")
	fs.DurationVar(&o.interval, "interval", 2*time.Second, "how often to poll")
	addClusterFlag(a, cmd, &o.cluster)
	a.setup(cmd.RegisterFlagCompletionFunc("for", cobra.FixedCompletions([]string{
		"phase=Ready", "phase=Degraded", "phase=Progressing", "condition=Ready", "condition=Available", "delete",
	}, cobra.ShellCompDirectiveNoFileComp)))
	return cmd
}

func (a *app) wait(ctx context.Context, o *waitOptions, args []string) error {
	k, names, err := a.kindAndNames(args)
	if err != nil {
		return err
	}
	if len(names) != 1 {
		return usageErrorf("wait follows one resource: give its kind and name")
	}
	cond, err := parseWaitFor(o.forArg)
	if err != nil {
		return err
	}
	if o.interval <= 0 {
		return usageErrorf("--interval must be positive")
	}
	c, err := a.connect()
	if err != nil {
		return err
	}
	obj, err := c.resolve(ctx, k, o.cluster, names[0], true)
	var missing *notFoundError
	if cond.deleted && errors.As(err, &missing) {
		// Gone before the wait began (a fast delete, or a script run twice): what --for=delete waits for.
		_, err := fmt.Fprintf(a.stdout, "%s/%s deleted\n", k.Singular, names[0])
		return err
	}
	if err != nil {
		return err
	}
	return a.waitFor(ctx, c, k, obj, cond, o.timeout, o.interval)
}

// waitCondition is what wait waits for: one of a phase, a condition's status, or the resource being gone.
type waitCondition struct {
	phase     string
	condition string
	status    api.ConditionStatus
	deleted   bool
}

// parseWaitFor reads --for: phase=PHASE, condition=TYPE[=STATUS] (STATUS defaults to True) or delete.
func parseWaitFor(s string) (waitCondition, error) {
	what, arg, _ := strings.Cut(s, "=")
	switch strings.ToLower(what) {
	case "delete":
		if arg != "" {
			break
		}
		return waitCondition{deleted: true}, nil
	case "phase":
		for _, p := range []conditions.Phase{conditions.PhasePending, conditions.PhaseProgressing, conditions.PhaseReady,
			conditions.PhaseDegraded, conditions.PhaseDeleting} {
			if strings.EqualFold(arg, string(p)) {
				return waitCondition{phase: string(p)}, nil
			}
		}
		return waitCondition{}, usageErrorf("--for=%s: phases are Pending, Progressing, Ready, Degraded and Deleting", s)
	case "condition":
		typ, status, _ := strings.Cut(arg, "=")
		if typ == "" {
			break
		}
		w := waitCondition{condition: typ, status: api.ConditionStatus(conditions.True)}
		if status != "" {
			st := conditions.Status(strings.ToUpper(status[:1]) + strings.ToLower(status[1:]))
			if !st.Valid() {
				return waitCondition{}, usageErrorf("--for=%s: a condition's status is True, False or Unknown", s)
			}
			w.status = api.ConditionStatus(st)
		}
		return w, nil
	}
	return waitCondition{}, usageErrorf("--for=%s: want phase=PHASE, condition=TYPE[=STATUS] or delete", s)
}

func (w waitCondition) String() string {
	switch {
	case w.deleted:
		return "deletion"
	case w.phase != "":
		return "phase=" + w.phase
	default:
		return "condition " + w.condition + "=" + string(w.status)
	}
}

// met reports whether o (nil: gone) satisfies w.
func (w waitCondition) met(o *object) bool {
	switch {
	case w.deleted:
		return o == nil
	case o == nil:
		return false
	case w.phase != "":
		return o.phase() == w.phase
	default:
		c := findCondition(o.conditions(), w.condition)
		return c != nil && c.Status == w.status
	}
}

// describeState says where o stands: its phase and the conditions that are not True yet, with their reasons.
func describeState(o *object) string {
	if o == nil {
		return "gone"
	}
	s := "phase " + orNone(o.phase())
	var pending []string
	for _, c := range o.conditions() {
		if c.Status == api.ConditionStatus(conditions.True) {
			continue
		}
		p := c.Type
		if r := deref(c.Reason); r != "" {
			p += " (" + r + ")"
		}
		pending = append(pending, p)
	}
	if len(pending) > 0 {
		s += "; not True yet: " + strings.Join(pending, ", ")
	}
	return s
}

// errMet ends following a resource once the condition holds.
var errMet = errors.New("condition met")

// waitFor follows o until cond holds, timeout passes (0: no limit) or ctx ends, with a progress line on stderr.
// Success is reported on stdout: "cluster/demo condition met" or "cluster/demo deleted".
func (a *app) waitFor(ctx context.Context, c *client, k *api.Kind, o *object, cond waitCondition, timeout, interval time.Duration) error {
	label := k.Singular + "/" + o.name()
	start := time.Now()
	wctx, cancel := ctx, context.CancelFunc(func() {})
	if timeout > 0 {
		wctx, cancel = context.WithTimeout(ctx, timeout)
	}
	defer cancel()
	last := o
	line := newProgress(a.stderr, label, cond.String())
	fetch := func(ctx context.Context) (*object, error) {
		cur, err := c.object(ctx, k, o.ref())
		if notFound(err) {
			return nil, nil
		}
		return cur, err
	}
	err := newSource(interval, fetch, a.warner()).follow(wctx, func(cur *object) error {
		if cond.met(cur) {
			return errMet
		}
		if cur == nil {
			return fmt.Errorf("%s was deleted while waiting for %s", label, cond)
		}
		last = cur
		line.update(describeState(cur), time.Since(start))
		return nil
	})
	line.finish()
	switch {
	case errors.Is(err, errMet):
		what := "condition met"
		if cond.deleted {
			what = "deleted"
		}
		_, err := fmt.Fprintf(a.stdout, "%s %s\n", label, what)
		return err
	case ctx.Err() != nil:
		return errInterrupted
	case wctx.Err() != nil:
		return fmt.Errorf("timed out after %s waiting for %s to reach %s: %s", timeout, label, cond, describeState(last))
	default:
		return err
	}
}

// progress is wait's status line on stderr: rewritten in place on a terminal, else a new line per change.
type progress struct {
	w           io.Writer
	tty         bool
	width       int // the terminal's columns; 0 when unknown
	label, want string
	last        string
	drawn       bool
}

func newProgress(w io.Writer, label, want string) *progress {
	p := &progress{w: w, label: label, want: want}
	if f, ok := w.(*os.File); ok && isTerminal(f) {
		p.tty = true
		if cols, _, err := term.GetSize(int(f.Fd())); err == nil { //nolint:gosec // a file descriptor fits an int
			p.width = cols
		}
	}
	return p
}

// update shows the state; the time waited comes early in the line, so that a terminal too narrow for the
// whole line still shows it.
func (p *progress) update(state string, elapsed time.Duration) {
	took := elapsed.Round(time.Second)
	if p.tty {
		line := fmt.Sprintf("waiting for %s to reach %s (%s): %s", p.label, p.want, took, state)
		// A line wider than the terminal would wrap, and \r would then rewrite only its last row.
		if p.width > 1 && len(line) >= p.width {
			line = line[:p.width-1]
		}
		fmt.Fprintf(p.w, "\r\x1b[K%s", line)
		p.drawn = true
		return
	}
	// Elsewhere a line per change: the time waited alone is no change.
	if state != p.last {
		fmt.Fprintf(p.w, "waiting for %s to reach %s (%s): %s\n", p.label, p.want, took, state)
		p.last = state
	}
}

// finish ends the line on a terminal, so that what follows starts on a line of its own.
func (p *progress) finish() {
	if p.tty && p.drawn {
		fmt.Fprintln(p.w)
	}
}
