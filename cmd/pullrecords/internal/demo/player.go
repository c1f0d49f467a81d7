package demo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"time"

	"k8s.io/klog/v2"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/fsstore"
	"github.com/pullrecords/pullrecords/memstore"
	"github.com/pullrecords/pullrecords/pullmanager"
)

// Config says where and how to run the demo.
type Config struct {
	// KubeletDir is the kubelet directory to use; it must exist. Records go
	// to KubeletDir/image_manager.
	KubeletDir string
	// Logger receives the components' logs.
	Logger klog.Logger
	// NoSync turns fsync off (tests only; the demo syncs like a real node).
	NoSync bool
	// OnEvent, if set, is called for every event as it happens.
	OnEvent func(Event)
}

// player runs the scenario. The first error stops it: later actions do nothing.
type player struct {
	ctx   context.Context
	cfg   Config
	clock *clocktesting.FakeClock
	rt    *fakeRuntime

	store      *fsstore.Store
	cache      *memstore.Cache
	mgr        *pullmanager.PullManager
	policyName string
	allowlist  []string
	protect    bool

	// outcomes holds the last start event of each pod.
	outcomes map[string]Event

	sum Summary
	err error
}

// Run plays the default scenario in cfg.KubeletDir and returns its summary.
func Run(ctx context.Context, cfg Config) (Summary, error) {
	began := time.Now()
	if cfg.OnEvent == nil {
		cfg.OnEvent = func(Event) {}
	}
	p := &player{
		ctx:        ctx,
		cfg:        cfg,
		clock:      clocktesting.NewFakeClock(startTime),
		rt:         newFakeRuntime(),
		policyName: policyDefault,
		outcomes:   map[string]Event{},
	}
	p.setUp()
	p.sum.Policy = policyDefault
	if err := p.boot(); err != nil {
		return p.sum, err
	}
	err := p.play()
	if cerr := p.shutdown(); err == nil {
		err = cerr
	}
	if err == nil {
		err = p.count()
	}
	p.sum.Elapsed = time.Since(began)
	return p.sum, err
}

func (p *player) logger() klog.Logger { return p.cfg.Logger }

// tick advances the fake clock and returns its time of day.
func (p *player) tick() string {
	p.clock.Step(30 * time.Second)
	return p.clock.Now().UTC().Format("15:04:05")
}

func (p *player) emit(e Event) { p.cfg.OnEvent(e) }

func (p *player) fail(err error) {
	if p.err == nil {
		p.err = err
	}
}

// boot opens the store, the cache and a manager, as the kubelet does at start.
func (p *player) boot() error {
	var opts []fsstore.Option
	if p.cfg.NoSync {
		opts = append(opts, fsstore.WithoutSync())
	}
	store, err := fsstore.New(p.logger(), p.cfg.KubeletDir, opts...)
	if err != nil {
		return err
	}
	cache, err := memstore.NewCache(p.logger(), store)
	if err != nil {
		store.Close()
		return err
	}
	p.store, p.cache = store, cache
	return p.newManager()
}

func (p *player) newManager() error {
	policy, err := pullmanager.NewImagePullCredentialVerificationPolicy(pullmanager.VerificationPolicy(p.policyName), p.allowlist)
	if err != nil {
		return err
	}
	ctx := klog.NewContext(p.ctx, p.logger())
	mgr, err := pullmanager.NewImagePullManager(ctx, p.cache, policy, p.rt,
		pullmanager.WithClock(p.clock), pullmanager.WithPreloadedImageProtection(p.protect))
	if err != nil {
		return err
	}
	p.mgr = mgr
	return nil
}

// shutdown closes the store, as a kubelet stopping does.
func (p *player) shutdown() error {
	if p.store == nil {
		return nil
	}
	err := p.store.Close()
	p.store, p.cache, p.mgr = nil, nil, nil
	return err
}

func (p *player) act(text string) {
	if p.err != nil {
		return
	}
	p.emit(Event{Kind: KindAct, Text: text})
}

func (p *player) getCredentials(pod Pod, called *bool) pullmanager.GetPodCredentials {
	return func() ([]accessor.ImagePullSecret, *accessor.ImagePullServiceAccount, error) {
		*called = true
		return pod.Secrets, pod.ServiceAccount, nil
	}
}

// decide asks the manager to explain its answer (a dry run), then makes the
// check the demo acts on, and checks the two agree: it guards the dry-run
// path at every decision.
func (p *player) decide(pod Pod, image, imageRef string) (pullmanager.Explanation, error) {
	ctx := klog.NewContext(p.ctx, p.logger())
	var explained, called bool
	before, err := p.readRecord(imageRef)
	if err != nil {
		return pullmanager.Explanation{}, err
	}
	e := p.mgr.ExplainImagePull(ctx, image, imageRef, p.getCredentials(pod, &explained))
	must, err := p.mgr.MustAttemptImagePull(ctx, image, imageRef, p.getCredentials(pod, &called))
	if err != nil {
		return e, fmt.Errorf("pod %s, image %s: %w", pod.Name, image, err)
	}
	after, err := p.readRecord(imageRef)
	if err != nil {
		return e, err
	}
	return e, agree(pod, e, must, called, !reflect.DeepEqual(before, after))
}

// readRecord returns a copy of the record of imageRef, nil if none.
func (p *player) readRecord(imageRef string) (*accessor.ImagePulledRecord, error) {
	rec, _, err := p.cache.GetImagePulledRecord(imageRef)
	return rec, err
}

// agree checks the explanation e against the check: its answer must,
// whether it looked up the pod's credentials, and whether it wrote the
// record.
func agree(pod Pod, e pullmanager.Explanation, must, called, wrote bool) error {
	if must != e.MustPull {
		return fmt.Errorf("%w: pod %s, image %s: the check says mustPull=%t, the explanation says %t at step %d (%s)",
			ErrDisagree, pod.Name, e.Image, must, e.MustPull, e.DecidedAt, e.Rule)
	}
	if called != e.CredentialsLookedUp {
		return fmt.Errorf("%w: pod %s, image %s: the check looked up credentials: %t, the explanation: %t",
			ErrDisagree, pod.Name, e.Image, called, e.CredentialsLookedUp)
	}
	if wrote != (e.WouldRecord != nil) {
		return fmt.Errorf("%w: pod %s, image %s: the check wrote the record: %t, the explanation says it would: %t",
			ErrDisagree, pod.Name, e.Image, wrote, e.WouldRecord != nil)
	}
	return nil
}

// start is a pod asking for image: the check, then a pull if needed and
// the pod's imagePullPolicy allows one.
func (p *player) start(pod Pod, image string) {
	if p.err != nil {
		return
	}
	ev := Event{Kind: KindStart, Time: p.tick(), Pod: pod.Name, Image: image, PullPolicy: pod.PullPolicy}
	ev.ImageRef = p.rt.imageRef(image)
	if ev.ImageRef == "" {
		ev.Decision = "not present"
	} else {
		e, err := p.decide(pod, image, ev.ImageRef)
		if err != nil {
			p.fail(err)
			return
		}
		p.sum.Decisions++
		ev.Decision, ev.Result, ev.Step, ev.Rule = "may use", e.Result, int(e.DecidedAt), e.Rule
		if e.MustPull {
			ev.Decision = "must pull"
			p.sum.MustPull++
		} else {
			p.sum.MayUse++
			ev.Outcome = "running"
			p.finish(ev)
			return
		}
	}
	if pod.PullPolicy == PullPolicyNever {
		// The kubelet may not pull: a must-pull answer (or an absent
		// image) fails the container.
		p.sum.NeverPulled++
		ev.Pull, ev.Outcome = "imagePullPolicy Never forbids the pull", "ErrImageNeverPull"
		p.finish(ev)
		return
	}
	var denied bool
	ev.Pull, ev.Outcome, denied = p.pull(pod, image)
	if denied && ev.ImageRef != "" {
		ev.WithoutCheck = p.withoutCheck(pod, image, ev.ImageRef)
		p.sum.Prevented++
	}
	p.finish(ev)
}

// finish emits a pod start and remembers its outcome.
func (p *player) finish(ev Event) {
	if p.outcomes == nil {
		p.outcomes = map[string]Event{}
	}
	p.outcomes[ev.Pod] = ev
	p.emit(ev)
}

// withoutCheck says what a kubelet without the check does for a pod the
// registry refused although the image is present: under IfNotPresent it
// starts the present image, pulled by another pod with that pod's
// credentials.
func (p *player) withoutCheck(pod Pod, image, imageRef string) string {
	by, ok := p.rt.privatePuller(imageRef)
	if !ok {
		return pod.Name + " would run the copy of " + image + " already on the node, which its credentials cannot pull"
	}
	owner, _, _ := strings.Cut(by.pod, "/")
	return fmt.Sprintf("%s would run %s's private image, pulled by %s %s", pod.Name, owner, by.pod, by.with)
}

// contrast states what the outcomes of two pods asking for image, one with
// the kubernetes#138175 fix and one without, show. Both must have started.
func (p *player) contrast(fixed, upstream, image, secondName string) {
	if p.err != nil {
		return
	}
	a, okA := p.outcomes[fixed]
	b, okB := p.outcomes[upstream]
	if !okA || !okB {
		p.fail(fmt.Errorf("demo scenario: no outcome for %s or %s", fixed, upstream))
		return
	}
	if a.Outcome == b.Outcome {
		p.emit(Event{Kind: KindNote, Text: fmt.Sprintf("the fix changes nothing here: %s and %s both end %s", fixed, upstream, a.Outcome)})
		return
	}
	owner, _, _ := strings.Cut(p.outcomesByImage(secondName), "/")
	p.emit(Event{Kind: KindNote, Text: fmt.Sprintf(
		"the harm: %s's pull of the same content as %s makes the preloaded image\n"+
			"count as pulled by the kubelet, with no credentials recorded for its own name.\n"+
			"  with the fix:  %s runs %s from the node -> %s\n"+
			"  upstream:      %s may not use it -> %s; under IfNotPresent it would have to\n"+
			"                 pull it again, so a node that cannot reach the registry fails the same way",
		owner, secondName, fixed, image, a.Outcome, upstream, b.Outcome)})
}

// outcomesByImage returns the pod that last started image, or "".
func (p *player) outcomesByImage(image string) string {
	pod := ""
	for name, ev := range p.outcomes {
		if ev.Image == image && (pod == "" || ev.Time > p.outcomes[pod].Time) {
			pod = name
		}
	}
	return pod
}

// pull is the kubelet's pull: intent, pull, then record success or failure.
// denied reports that the registry refused the pod's credentials.
func (p *player) pull(pod Pod, image string) (pull, outcome string, denied bool) {
	p.sum.Pulls++
	if err := p.mgr.RecordPullIntent(p.logger(), image); err != nil {
		p.fail(err)
		return "", "", false
	}
	ctx := klog.NewContext(p.ctx, p.logger())
	id, used, err := p.rt.pull(image, pod)
	if err != nil {
		p.mgr.RecordImagePullFailed(ctx, image)
		p.sum.PullsDenied++
		if !errors.Is(err, ErrPullDenied) {
			p.fail(err)
		}
		return "pull denied by the registry", "ErrImagePull", true
	}
	p.mgr.RecordImagePulled(ctx, image, id, used)
	return "pulled " + describeCredentials(used), "running", false
}

func describeCredentials(c *accessor.ImagePullCredentials) string {
	switch {
	case c.NodePodsAccessible:
		return "anonymously (node-wide)"
	case len(c.KubernetesSecrets) > 0:
		s := c.KubernetesSecrets[0]
		return "with secret " + s.Namespace + "/" + s.Name
	case len(c.KubernetesServiceAccounts) > 0:
		sa := c.KubernetesServiceAccounts[0]
		return "with service account " + sa.Namespace + "/" + sa.Name
	}
	return "without credentials"
}

// crashMidPull writes the intent and lets the runtime finish the pull, then
// stops the kubelet before it records the result.
func (p *player) crashMidPull(pod Pod, image string) {
	if p.err != nil {
		return
	}
	at := p.tick()
	p.sum.Pulls++
	if err := p.mgr.RecordPullIntent(p.logger(), image); err != nil {
		p.fail(err)
		return
	}
	if _, _, err := p.rt.pull(image, pod); err != nil {
		p.fail(err)
		return
	}
	if err := p.shutdown(); err != nil {
		p.fail(err)
		return
	}
	intents, _, err := p.filesOnDisk()
	if err != nil {
		p.fail(err)
		return
	}
	p.emit(Event{Kind: KindRestart, Time: at, Pod: pod.Name, Image: image,
		Text: fmt.Sprintf("%s pulls %s; the runtime finishes the pull, but the kubelet stops before recording it (%s on disk)",
			pod.Name, image, plural(intents, "intent file"))})
}

// restart starts the kubelet again: start-up recovery runs in the manager.
func (p *player) restart() {
	if p.err != nil {
		return
	}
	at := p.tick()
	if err := p.boot(); err != nil {
		p.fail(err)
		return
	}
	intents, records, err := p.filesOnDisk()
	if err != nil {
		p.fail(err)
		return
	}
	p.emit(Event{Kind: KindRestart, Time: at,
		Text: fmt.Sprintf("kubelet starts: start-up recovery turns intents the runtime now has into records without credentials (%s, %s on disk)",
			plural(intents, "intent file"), plural(records, "record file"))})
}

// prune removes image from the runtime and prunes records of images the
// runtime no longer has, taking until before listing, as the kubelet's image
// GC does.
func (p *player) prune(image string) {
	if p.err != nil {
		return
	}
	at := p.tick()
	id := p.rt.imageRef(image)
	_, before, err := p.filesOnDisk()
	if err != nil {
		p.fail(err)
		return
	}
	until := p.clock.Now()
	p.rt.remove(id)
	images, err := p.rt.ListImages(p.ctx)
	if err != nil {
		p.fail(err)
		return
	}
	ids := make([]string, 0, len(images))
	for _, img := range images {
		ids = append(ids, img.ID)
	}
	p.mgr.PruneUnknownRecords(klog.NewContext(p.ctx, p.logger()), ids, until)
	_, after, err := p.filesOnDisk()
	if err != nil {
		p.fail(err)
		return
	}
	p.emit(Event{Kind: KindPrune, Time: at, Image: image,
		Text: fmt.Sprintf("image GC removes %s; pruning records updated before %s whose image is gone: %s removed, %s left",
			image, until.UTC().Format("15:04:05"), plural(before-after, "record"), plural(after, "record"))})
}

// usePolicy restarts the manager with another policy (and preloaded image
// protection on or off) over the same records.
func (p *player) usePolicy(name string, allowlist []string, protect bool) {
	if p.err != nil {
		return
	}
	wasProtected := p.protect
	p.policyName, p.allowlist, p.protect = name, allowlist, protect
	if err := p.newManager(); err != nil {
		p.fail(err)
		return
	}
	text := "policy is now " + name
	if len(allowlist) > 0 {
		text += " with allowlist " + strings.Join(allowlist, ",")
	}
	switch {
	case protect:
		text += ", with preloaded image protection (the fix for kubernetes#138175)"
	case wasProtected:
		text += ", without preloaded image protection (upstream behaviour)"
	}
	p.emit(Event{Kind: KindPolicy, Time: p.tick(), Text: text})
}

// filesOnDisk counts the files in the intents and records directories.
func (p *player) filesOnDisk() (intents, records int, err error) {
	count := func(dir string) (int, error) {
		entries, err := os.ReadDir(filepath.Join(p.cfg.KubeletDir, fsstore.DirName, dir))
		if errors.Is(err, os.ErrNotExist) {
			return 0, nil
		}
		return len(entries), err
	}
	if intents, err = count(fsstore.IntentsDir); err != nil {
		return 0, 0, err
	}
	records, err = count(fsstore.RecordsDir)
	return intents, records, err
}

// count fills the summary's on-disk numbers from a fresh read-only store.
func (p *player) count() error {
	store, err := fsstore.New(p.logger(), p.cfg.KubeletDir, fsstore.WithReadOnly())
	if err != nil {
		return err
	}
	defer store.Close()
	intents, err := store.ListImagePullIntents()
	if err != nil {
		return err
	}
	records, err := store.ListImagePulledRecords()
	if err != nil {
		return err
	}
	p.sum.Intents, p.sum.Records = len(intents), len(records)
	i, r, err := p.filesOnDisk()
	p.sum.Files = i + r
	return err
}

func plural(n int, word string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, word)
	}
	return fmt.Sprintf("%d %ss", n, word)
}
