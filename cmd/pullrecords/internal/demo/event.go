package demo

import (
	"fmt"
	"strings"
	"time"
)

// Event kinds.
const (
	KindAct     = "act"     // a new part of the story begins
	KindStart   = "start"   // a pod asks for an image
	KindRestart = "restart" // the kubelet stops or starts
	KindPrune   = "prune"   // image GC and record pruning
	KindPolicy  = "policy"  // the node's policy changes
	KindNote    = "note"    // what two outcomes side by side show
)

// PullPolicyNever is the imagePullPolicy under which the kubelet never
// pulls; pods without a policy use IfNotPresent.
const PullPolicyNever = "Never"

// Event is one thing that happened on the demo node.
type Event struct {
	Kind string `json:"kind"`
	// Time is the fake clock's time of day.
	Time string `json:"time,omitempty"`
	// Text describes acts, restarts, prunes and policy changes.
	Text string `json:"text,omitempty"`

	Pod   string `json:"pod,omitempty"`
	Image string `json:"image,omitempty"`
	// PullPolicy is the container's imagePullPolicy when it is not
	// IfNotPresent.
	PullPolicy string `json:"pullPolicy,omitempty"`
	ImageRef   string `json:"imageRef,omitempty"`
	// Decision is "not present", "may use" or "must pull".
	Decision string `json:"decision,omitempty"`
	// Result is the manager's result label for the decision.
	Result string `json:"result,omitempty"`
	// Step and Rule name the rule that decided.
	Step int    `json:"step,omitempty"`
	Rule string `json:"rule,omitempty"`
	// Pull is what the pull did, if one was needed.
	Pull string `json:"pull,omitempty"`
	// Outcome is "running" or the kubelet's error for the container.
	Outcome string `json:"outcome,omitempty"`
	// WithoutCheck says, for a pod the registry refused (it has no
	// credentials for the image), what a kubelet without the check would
	// have started: the image already on the node, pulled by another pod.
	WithoutCheck string `json:"withoutCheck,omitempty"`
}

// Summary counts what the demo did.
type Summary struct {
	Policy      string `json:"policy"`
	Decisions   int    `json:"decisions"`
	MayUse      int    `json:"mayUse"`
	MustPull    int    `json:"mustPull"`
	Pulls       int    `json:"pulls"`
	PullsDenied int    `json:"pullsDenied"`
	// NeverPulled counts pods with imagePullPolicy Never told to pull
	// (ErrImageNeverPull).
	NeverPulled int `json:"errImageNeverPull"`
	// Prevented counts pods that, without the check, would have run an
	// image another tenant pulled with its own credentials.
	Prevented int `json:"prevented"`
	Records   int `json:"records"`
	Intents   int `json:"intents"`
	Files     int `json:"filesOnDisk"`
	// Elapsed is the wall time the demo took.
	Elapsed time.Duration `json:"-"`
}

// Format renders e for a terminal, one or two lines with a newline.
func (e Event) Format() string {
	var b strings.Builder
	switch e.Kind {
	case KindAct:
		fmt.Fprintf(&b, "\n== %s\n", e.Text)
	case KindStart:
		fmt.Fprintf(&b, "%s  %-16s %s", e.Time, e.Pod, e.Image)
		if e.PullPolicy != "" {
			fmt.Fprintf(&b, "  (imagePullPolicy: %s)", e.PullPolicy)
		}
		b.WriteString("\n")
		b.WriteString("          ")
		b.WriteString(e.Decision)
		if e.Step > 0 {
			fmt.Fprintf(&b, "  [step %d: %s]", e.Step, e.Rule)
		}
		if e.Pull != "" {
			b.WriteString(" -> " + e.Pull)
		}
		b.WriteString(" -> " + e.Outcome + "\n")
		if e.WithoutCheck != "" {
			b.WriteString("          without the check: " + e.WithoutCheck + "\n")
		}
	case KindNote:
		for _, line := range strings.Split(e.Text, "\n") {
			b.WriteString("          " + line + "\n")
		}
	default:
		fmt.Fprintf(&b, "%s  %s\n", e.Time, e.Text)
	}
	return b.String()
}

// Format renders the summary; elapsed time is printed only if withTiming.
func (s Summary) Format(withTiming bool) string {
	var b strings.Builder
	b.WriteString("\nSummary\n")
	fmt.Fprintf(&b, "  decisions:  %d (%d may use, %d must pull), each explained and checked against the manager\n",
		s.Decisions, s.MayUse, s.MustPull)
	fmt.Fprintf(&b, "  pulls:      %d (%d succeeded, %d denied)", s.Pulls, s.Pulls-s.PullsDenied, s.PullsDenied)
	if s.NeverPulled > 0 {
		fmt.Fprintf(&b, "; %d refused by imagePullPolicy Never", s.NeverPulled)
	}
	b.WriteString("\n")
	fmt.Fprintf(&b, "  prevented:  %d pod starts that, without the check, would have run another tenant's private image\n", s.Prevented)
	fmt.Fprintf(&b, "  on disk:    %d pulled records, %d intents, %d files\n", s.Records, s.Intents, s.Files)
	if withTiming {
		fmt.Fprintf(&b, "  elapsed:    %s\n", s.Elapsed.Round(time.Millisecond))
	}
	return b.String()
}
