package imagecache

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/accessor"
	"github.com/pullrecords/pullrecords/imageruntime"
	"github.com/pullrecords/pullrecords/pullmanager"
)

// outcome is what one attempt decided for a group of requests.
type outcome struct {
	status   ImageWorkStatus
	reason   string
	message  string
	imageRef string
	retry    bool // a transient failure: try again if attempts are left
}

func (m *Manager) resultFor(r *request, now time.Time, o outcome) ImageWorkResult {
	res := ImageWorkResult{Request: r.req, Status: o.status, Reason: o.reason, Message: o.message,
		ImageRef: o.imageRef, Started: r.started, Finished: now, Attempts: r.attempts}
	if !r.started.IsZero() {
		res.Duration = now.Sub(r.started)
	}
	return res
}

func (m *Manager) processNext(ctx context.Context) bool {
	image, shutdown := m.queue.Get()
	if shutdown {
		return false
	}
	defer m.queue.Done(image)
	m.process(ctx, image)
	return true
}

// pullGroup is the pull requests for one image that share credentials and
// ForceFullCache: one CRI pull serves them all.
type pullGroup struct {
	secret *PullSecret
	force  bool
	reqs   []*request
}

func groupKey(s *PullSecret, force bool) string {
	k := fmt.Sprintf("force=%t", force)
	switch {
	case s != nil && s.DockerConfigPath != "":
		// Resolved at pull time: the path stands for the content.
		k += "|" + s.Namespace + "/" + s.Name + "/" + s.UID + "|path=" + s.DockerConfigPath
	case s != nil:
		// The hash stands for the content; the coordinates are recorded
		// per secret, so each secret gets its own pull and record.
		k += "|" + s.Namespace + "/" + s.Name + "/" + s.UID + "/" + credentialHash(s)
	}
	return k
}

// process runs every request waiting for image: the pulls, grouped by
// credentials, or one removal.
func (m *Manager) process(ctx context.Context, image string) {
	m.mu.Lock()
	e := m.entries[image]
	if e == nil || len(e.waiting) == 0 {
		m.mu.Unlock()
		m.queue.Forget(image)
		return
	}
	work := e.waiting
	e.waiting = nil
	e.inFlight += len(work)
	now := m.clock.Now()
	for _, r := range work {
		r.attempts++
		if r.started.IsZero() {
			r.started = now
		}
		r.batch.inFlight++
	}
	var keepers []string
	for ref, cs := range m.caches {
		if slices.Contains(cs.spec.Images, image) {
			keepers = append(keepers, ref.String())
		}
	}
	var groups []*pullGroup
	index := map[string]*pullGroup{}
	var removals []*request
	for _, r := range work {
		switch {
		case ctx.Err() != nil:
			m.finishLocked(r, m.resultFor(r, now, outcome{status: StatusUnknown, reason: ReasonShutDown,
				message: "The manager shut down before the work ran"}), true)
		case r.removes() && len(keepers) > 0:
			m.finishLocked(r, m.resultFor(r, now, outcome{status: StatusSucceeded, reason: ReasonKeptByOther,
				message: "Not removed: still kept by " + strings.Join(slices.Sorted(slices.Values(keepers)), ", ")}), true)
		case r.removes():
			removals = append(removals, r)
		default:
			cs := m.caches[r.req.ImageCache]
			if cs == nil || !slices.Contains(cs.spec.Images, image) {
				m.finishLocked(r, m.resultFor(r, now, outcome{status: StatusUnknown, reason: ReasonSuperseded,
					message: "Not pulled: the image is no longer in the cache"}), true)
				continue
			}
			if m.pulls == nil && cs.spec.PullSecret != nil {
				// Applied by an in-process manager on the same state
				// directory.
				m.finishLocked(r, m.resultFor(r, now, outcome{status: StatusFailed, reason: ReasonPrivateImage,
					message: "Not pulled: " + privateImageError(cs.spec).Error()}), true)
				continue
			}
			force := r.req.ForceFullCache
			k := groupKey(cs.spec.PullSecret, force)
			g := index[k]
			if g == nil {
				g = &pullGroup{secret: cs.spec.PullSecret, force: force}
				index[k] = g
				groups = append(groups, g)
			}
			g.reqs = append(g.reqs, r)
		}
	}
	m.mu.Unlock()
	m.flush()

	type decided struct {
		reqs []*request
		o    outcome
	}
	var results []decided
	for _, g := range groups {
		results = append(results, decided{g.reqs, m.pull(ctx, image, g)})
	}
	if len(removals) > 0 {
		results = append(results, decided{removals, m.remove(ctx, image)})
	}

	m.mu.Lock()
	now = m.clock.Now()
	requeue := false
	for _, d := range results {
		for _, r := range d.reqs {
			if d.o.retry && r.attempts < m.opts.maxAttempts && ctx.Err() == nil {
				requeue = true
				r.batch.inFlight--
				e.inFlight--
				e.waiting = append(e.waiting, r)
				continue
			}
			o := d.o
			if o.retry && o.status == StatusFailed && r.attempts > 1 {
				o.message = fmt.Sprintf("After %d attempts: %s", r.attempts, o.message)
			}
			m.finishLocked(r, m.resultFor(r, now, o), true)
		}
	}
	if requeue && m.entries[image] == nil {
		m.entries[image] = e
	}
	m.mu.Unlock()
	if requeue {
		m.queue.AddRateLimited(image)
	} else {
		m.queue.Forget(image)
	}
	m.flush()
}

// podCredentials is what a pod holding exactly the group's secret presents
// to MustAttemptImagePull: as the kubelet's getPodCredentials, one
// ImagePullSecret per matching credential, each with its own hash.
func podCredentials(cands []pullCredential) pullmanager.GetPodCredentials {
	secrets := make([]accessor.ImagePullSecret, 0, len(cands))
	for _, c := range cands {
		secrets = append(secrets, c.secret)
	}
	return func() ([]accessor.ImagePullSecret, *accessor.ImagePullServiceAccount, error) {
		return secrets, nil, nil
	}
}

// recordedAs is what a pull made with c is recorded as: the secret with
// c's hash, or node-wide for an anonymous pull (nil).
func recordedAs(c *pullCredential) *accessor.ImagePullCredentials {
	if c == nil {
		return &accessor.ImagePullCredentials{NodePodsAccessible: true}
	}
	return &accessor.ImagePullCredentials{KubernetesSecrets: []accessor.ImagePullSecret{c.secret}}
}

// pull makes one attempt for a group: "already pulled" when the runtime has
// the image and the pull manager would let a pod with the group's credentials
// use it; otherwise a recorded pull.
func (m *Manager) pull(ctx context.Context, image string, g *pullGroup) outcome {
	if m.pulls == nil {
		return m.pullStandalone(ctx, image, g)
	}
	logger := m.logger.WithValues("image", image)
	if g.secret != nil {
		logger = logger.WithValues("secret", g.secret.Namespace+"/"+g.secret.Name)
	}
	// Resolved before anything else, at every attempt: the check below
	// needs the credentials' hashes, and a mounted secret may have rotated.
	cands, err := resolveCredentials(g.secret, image)
	if err != nil {
		var ce *credentialError
		if errors.As(err, &ce) {
			logger.V(2).Info("No credential to pull with", "reason", ce.reason, "detail", ce.msg)
			return outcome{status: StatusFailed, reason: ce.reason, message: "Not pulled: " + ce.msg}
		}
		return outcome{status: StatusFailed, reason: ReasonPullFailed, message: "Not pulled: " + err.Error()}
	}
	rctx, cancel := context.WithTimeout(ctx, m.opts.requestTimeout)
	defer cancel()
	podCreds := podCredentials(cands)

	if !g.force {
		st, err := m.images.ImageStatus(rctx, image)
		if err != nil {
			return m.failure(ctx, ReasonStatusFailed, err)
		}
		if st != nil {
			must, err := m.pulls.MustAttemptImagePull(rctx, image, st.ID, podCreds)
			if err == nil && !must {
				logger.V(3).Info("Image already present and usable with the cache's credentials", "imageRef", st.ID)
				return outcome{status: StatusAlreadyPulled, reason: ReasonAlreadyPresent, imageRef: st.ID,
					message: "Present on the node and usable with the cache's credentials"}
			}
			if err != nil {
				logger.Error(err, "Checking pull records failed; pulling to verify")
			}
		}
	}

	if err := m.pulls.RecordPullIntent(logger, image); err != nil {
		return outcome{status: StatusFailed, reason: ReasonIntentFailed, retry: true,
			message: "Not pulled: recording the pull intent failed: " + err.Error()}
	}
	ref, used, err := m.pullWith(rctx, logger, image, cands)
	bg := context.WithoutCancel(ctx)
	if err != nil {
		m.pulls.RecordImagePullFailed(bg, image)
		logger.V(2).Info("Image pull failed", "err", err, "transient", IsTransient(err))
		return m.failure(ctx, ReasonPullFailed, err)
	}
	// Checks look records up by the image ID (the kubelet's GetImageRef is
	// ImageStatus's ID), while some runtimes return a repo digest from the
	// pull: record under the ID, or the record would never be found and the
	// image would pass for preloaded (kubernetes#137024).
	if st, err := m.images.ImageStatus(rctx, image); err == nil && st != nil && st.ID != "" {
		ref = st.ID
	} else {
		logger.Info("Could not read the pulled image's ID; recording the pull under the reference the pull returned", "imageRef", ref, "err", err)
	}
	m.pulls.RecordImagePulled(bg, image, ref, recordedAs(used))
	msg := "Pulled anonymously; usable by every pod on the node"
	switch {
	case used != nil && used.entry != "":
		logger.V(2).Info("Pulled image", "imageRef", ref, "dockerConfigEntry", used.entry)
		msg = fmt.Sprintf("Pulled with the credentials of secret %s/%s (docker config entry %q)", used.secret.Namespace, used.secret.Name, used.entry)
	case used != nil:
		logger.V(2).Info("Pulled image", "imageRef", ref)
		msg = "Pulled with the credentials of secret " + used.secret.Namespace + "/" + used.secret.Name
	default:
		logger.V(2).Info("Pulled image", "imageRef", ref)
	}
	return outcome{status: StatusSucceeded, reason: ReasonPulled, imageRef: ref, message: msg}
}

// pullWith pulls image through the image service: anonymously when cands
// is empty, else with each credential in turn until one succeeds, as the
// kubelet's runtime manager (kuberuntime's PullImage) tries a pod's
// matching credentials. It returns the credential used (nil when
// anonymous). It stops early when ctx ends. When every attempt fails the
// error lists them all and is classified by the one most worth retrying
// (see pullAttemptsError).
func (m *Manager) pullWith(ctx context.Context, logger klog.Logger, image string, cands []pullCredential) (string, *pullCredential, error) {
	if len(cands) == 0 {
		ref, err := m.criPull(ctx, image, nil)
		return ref, nil, err
	}
	var errs []error
	for i := range cands {
		c := &cands[i]
		auth := c.auth
		ref, err := m.criPull(ctx, image, &auth)
		if err == nil {
			return ref, c, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
		if i+1 < len(cands) {
			logger.V(2).Info("Image pull with a matching credential failed; trying the next one", "dockerConfigEntry", c.entry, "err", err)
		}
	}
	if len(errs) == 1 {
		return "", nil, errs[0]
	}
	return "", nil, newPullAttemptsError(cands, errs)
}

// criPull makes one CRI pull and counts it.
func (m *Manager) criPull(ctx context.Context, image string, auth *imageruntime.AuthConfig) (string, error) {
	start := m.clock.Now()
	ref, err := m.images.PullImage(ctx, image, auth)
	elapsed := m.clock.Since(start).Seconds()
	result := "succeeded"
	if err != nil {
		result = "failed"
	}
	m.metrics.pulls.WithLabelValues(result).Inc()
	m.metrics.pullDuration.WithLabelValues(result).Observe(elapsed)
	return ref, err
}

// pullAttemptsError is the failure of a pull that tried several
// credentials. It unwraps to the error that decides how the failure is
// classified (IsTransient, IsUnauthorized, IsTimeout): the first transient
// one (trying again may succeed), else the first that is not a refusal of
// the credentials, else the first; so it reads as Unauthorized only when
// the registry refused every credential.
type pullAttemptsError struct {
	entries  []string
	errs     []error
	decisive int
	total    int
}

func newPullAttemptsError(cands []pullCredential, errs []error) *pullAttemptsError {
	e := &pullAttemptsError{errs: errs, total: len(cands)}
	for _, c := range cands[:len(errs)] {
		e.entries = append(e.entries, c.entry)
	}
	if i := slices.IndexFunc(errs, IsTransient); i >= 0 {
		e.decisive = i
	} else if i := slices.IndexFunc(errs, func(err error) bool { return !IsUnauthorized(err) }); i >= 0 {
		e.decisive = i
	} else {
		e.decisive = 0
	}
	return e
}

func (e *pullAttemptsError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "pulls with %d of the %d matching credentials failed", len(e.errs), e.total)
	for i, err := range e.errs {
		fmt.Fprintf(&b, "; with entry %q: %v", e.entries[i], err)
	}
	return b.String()
}

func (e *pullAttemptsError) Unwrap() error { return e.errs[e.decisive] }

// pullStandalone makes one attempt for a group of a standalone manager: the
// group is anonymous (process refuses the others). "Already pulled" when the
// runtime has the image: an anonymous image is every pod's anyway. Nothing is
// recorded.
func (m *Manager) pullStandalone(ctx context.Context, image string, g *pullGroup) outcome {
	logger := m.logger.WithValues("image", image)
	if g.secret != nil {
		// Unreachable: process fails these requests first.
		return outcome{status: StatusFailed, reason: ReasonPrivateImage, message: ErrPrivateImage.Error()}
	}
	rctx, cancel := context.WithTimeout(ctx, m.opts.requestTimeout)
	defer cancel()
	if !g.force {
		st, err := m.images.ImageStatus(rctx, image)
		if err != nil {
			return m.failure(ctx, ReasonStatusFailed, err)
		}
		if st != nil {
			logger.V(3).Info("Image already present", "imageRef", st.ID)
			return outcome{status: StatusAlreadyPulled, reason: ReasonAlreadyPresent, imageRef: st.ID,
				message: "Present on the node"}
		}
	}
	start := m.clock.Now()
	ref, err := m.images.PullImage(rctx, image, nil)
	elapsed := m.clock.Since(start).Seconds()
	if err != nil {
		m.metrics.pulls.WithLabelValues("failed").Inc()
		m.metrics.pullDuration.WithLabelValues("failed").Observe(elapsed)
		logger.V(2).Info("Image pull failed", "err", err, "transient", IsTransient(err))
		return m.failure(ctx, ReasonPullFailed, err)
	}
	if st, err := m.images.ImageStatus(rctx, image); err == nil && st != nil && st.ID != "" {
		ref = st.ID
	}
	m.metrics.pulls.WithLabelValues("succeeded").Inc()
	m.metrics.pullDuration.WithLabelValues("succeeded").Observe(elapsed)
	logger.V(2).Info("Pulled image anonymously", "imageRef", ref)
	return outcome{status: StatusSucceeded, reason: ReasonPulled, imageRef: ref,
		message: "Pulled anonymously (nothing recorded); usable by every pod on the node"}
}

// remove makes one attempt to remove image and, once the runtime no longer
// has its content, its pulled record.
func (m *Manager) remove(ctx context.Context, image string) outcome {
	logger := m.logger.WithValues("image", image)
	rctx, cancel := context.WithTimeout(ctx, m.opts.requestTimeout)
	defer cancel()
	st, err := m.images.ImageStatus(rctx, image)
	if err != nil {
		return m.failure(ctx, ReasonStatusFailed, err)
	}
	if st == nil {
		return outcome{status: StatusSucceeded, reason: ReasonNotPresent, message: "The runtime does not have the image"}
	}
	keeper, err := m.keeperOf(rctx, image, st.ID)
	if err != nil {
		return m.failure(ctx, ReasonStatusFailed, err)
	}
	if keeper != "" {
		return outcome{status: StatusSucceeded, reason: ReasonKeptByOther, imageRef: st.ID,
			message: "Not removed: the same image is kept by " + keeper}
	}
	if err := m.images.RemoveImage(rctx, image); err != nil {
		return m.failure(ctx, ReasonRemoveFailed, err)
	}
	if pruner, ok := m.pulls.(recordPruner); ok {
		gone := func(ctx context.Context) (bool, error) {
			still, err := m.images.ImageStatus(ctx, st.ID)
			return still == nil, err
		}
		if err := pruner.PruneImagePulledRecord(klog.NewContext(rctx, logger), st.ID, gone); err != nil {
			// A stale record only makes pods re-verify, and the kubelet's
			// image garbage collection prunes it.
			return outcome{status: StatusFailed, reason: ReasonRecordFailed, imageRef: st.ID,
				message: "Image removed, but deleting its pulled record failed: " + err.Error()}
		}
	}
	logger.V(2).Info("Removed image", "imageRef", st.ID)
	return outcome{status: StatusSucceeded, reason: ReasonRemoved, imageRef: st.ID, message: "Removed from the node"}
}

// keeperOf returns an applied cache that lists another name for the image
// with ID id (removing one name of an image removes its content, and a
// runtime may drop every name with it), or "".
func (m *Manager) keeperOf(ctx context.Context, image, id string) (string, error) {
	m.mu.Lock()
	owners := map[string][]string{}
	for ref, cs := range m.caches {
		for _, img := range cs.spec.Images {
			if img != image {
				owners[img] = append(owners[img], ref.String())
			}
		}
	}
	m.mu.Unlock()
	for _, img := range slices.Sorted(maps.Keys(owners)) {
		st, err := m.images.ImageStatus(ctx, img)
		if err != nil {
			return "", err
		}
		if st != nil && st.ID == id {
			return strings.Join(slices.Sorted(slices.Values(owners[img])), ", ") + " (as " + img + ")", nil
		}
	}
	return "", nil
}

// failure classifies an error of an image service call (see IsTransient).
func (m *Manager) failure(ctx context.Context, reason string, err error) outcome {
	if ctx.Err() != nil {
		return outcome{status: StatusUnknown, reason: ReasonShutDown, message: "Cut off by shutdown: " + err.Error()}
	}
	switch {
	case IsUnauthorized(err):
		reason = ReasonUnauthorized
	case IsTimeout(err):
		reason = ReasonTimeout
	}
	return outcome{status: StatusFailed, reason: reason, message: err.Error(), retry: IsTransient(err)}
}
