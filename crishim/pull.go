package crishim

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/credstamp"
)

// Pull runs the whole gate around one pull, as a runtime's PullImage (or
// the CRI proxy) calls it:
//
//  1. Admit; a refusal returns before pull is called;
//  2. with Config.Runtime, what the image name pointed to before the pull,
//     so that a refused pull takes back only the names it created;
//  3. pull, which returns the runtime's image reference (image ID);
//  4. the check that the runtime holds what was proved. With
//     Config.Runtime, the image the name now points to must be the one
//     pulled and must be held under a digest of the image's repository
//     that the origin proved for this credential (the admission's, or a
//     fresh stamp); a mirror-only pull must resolve to content the node
//     does not hold from a pull made with a pod's credential (Config.Store);
//  5. a failed check removes the names the pull created (never content
//     another name uses, never a name a verified pull made) and returns a
//     *RefusalError wrapping ErrRefused and ErrUnverifiedContent or
//     ErrPrivateContent;
//  6. the pull is recorded (PullSucceeded).
//
// pull's error is returned as it is, and nothing is recorded.
func (g *Gate) Pull(ctx context.Context, req Request, pull func(context.Context) (string, error)) (string, error) {
	adm, err := g.Admit(ctx, req)
	if err != nil {
		return "", err
	}
	var before preState
	if g.cfg.Runtime != nil {
		before = g.lookBefore(ctx, req.Image)
	}
	imageRef, err := pull(ctx)
	if err != nil {
		return "", err
	}
	if err := g.checkPulled(ctx, req, adm, imageRef, before); err != nil {
		return "", err
	}
	g.PullSucceeded(ctx, req, imageRef)
	return imageRef, nil
}

// preState is what an image name pointed to before a pull.
type preState struct {
	known bool   // the runtime was asked and answered
	id    string // the image ID the name pointed to, "" for none
}

func (g *Gate) lookBefore(ctx context.Context, image string) preState {
	img, ok, err := g.cfg.Runtime.ImageStatus(ctx, image)
	switch {
	case err != nil:
		// Unknown: a refused pull then removes no name it cannot tell
		// it created.
		klog.FromContext(ctx).V(2).Info("Could not ask the runtime for the image before the pull", "image", image, "err", err)
		return preState{}
	case !ok:
		return preState{known: true}
	default:
		return preState{known: true, id: img.ID}
	}
}

// checkPulled is step 4 of Pull, and step 5 when it fails.
func (g *Gate) checkPulled(ctx context.Context, req Request, adm Admission, imageRef string, before preState) error {
	p, err := g.images.get(req.Image, parseImage)
	if err != nil { // Admit parsed it; cannot happen
		return &RefusalError{Image: req.Image, Pod: req.Pod, Err: fmt.Errorf("%w: %v", ErrInvalidImage, err)}
	}
	if g.cfg.Runtime == nil {
		if adm.MirrorOnly {
			return g.checkMirrorOnly(ctx, req, p, imageRef, RuntimeImage{ID: imageRef}, before)
		}
		// Without the runtime's word only a digest reference is known to
		// have been pulled as proved (the runtime fetched that digest).
		return nil
	}
	img, ok, err := g.cfg.Runtime.ImageStatus(ctx, req.Image)
	switch {
	case err != nil:
		return g.refuseAfter(ctx, req, p, ErrUnverifiedContent, "the runtime could not say what it pulled: "+err.Error())
	case !ok:
		return g.refuseAfter(ctx, req, p, ErrUnverifiedContent, "the runtime holds no image under the name it pulled")
	case img.ID != imageRef:
		// Another pull moved the name meanwhile: what this pull got
		// cannot be told, and no name is taken back.
		return g.refuseAfter(ctx, req, p, ErrUnverifiedContent, "the name points to image "+img.ID+", not to the pulled "+imageRef)
	}
	if adm.MirrorOnly {
		return g.checkMirrorOnly(ctx, req, p, imageRef, img, before)
	}
	cred := g.credentialFor(req, p.host)
	held := img.digestsFor(p.repository)
	for _, d := range held {
		if d == adm.Digest || g.cfg.Stamps.Fresh(credstamp.Key{Credential: cred.key, Repository: p.repository, Digest: d}, g.cfg.TTL) {
			return nil
		}
	}
	reason := fmt.Sprintf("the runtime holds it as %s, the origin proved %s", describeDigests(held), adm.Digest)
	g.undo(ctx, req, p, img, before)
	return g.refuseAfter(ctx, req, p, ErrUnverifiedContent, reason)
}

// checkMirrorOnly refuses a mirror-only pull whose image the node holds
// from a credentialed pull (Config.Store), under its image ID or any of its
// repository digests.
func (g *Gate) checkMirrorOnly(ctx context.Context, req Request, p parsedImage, imageRef string, img RuntimeImage, before preState) error {
	refs := append([]string{imageRef}, img.RepoDigests...)
	private, err := g.privateContent(refs)
	if err != nil {
		g.undo(ctx, req, p, img, before)
		return g.refuseAfter(ctx, req, p, ErrPrivateContent, "the records could not be read: "+err.Error())
	}
	if private == "" {
		return nil
	}
	g.undo(ctx, req, p, img, before)
	return g.refuseAfter(ctx, req, p, ErrPrivateContent, "the node holds it as "+private+" from a pull made with a pod's credential")
}

// undo takes back the names a refused pull created: the requested name,
// unless it pointed to this image before the pull (or that is unknown),
// and each "repository@digest" name of the image's repository that no
// verified pull recorded; then the image itself if no name is left. The
// image another name points to stays whole.
func (g *Gate) undo(ctx context.Context, req Request, p parsedImage, img RuntimeImage, before preState) {
	rt := g.cfg.Runtime
	if rt == nil || img.ID == "" {
		return
	}
	logger := klog.FromContext(ctx)
	var names []string
	if before.known && before.id != img.ID {
		if name, err := RuntimeName(req.Image); err == nil {
			names = append(names, name)
		}
	}
	for _, d := range img.digestsFor(p.repository) {
		name := p.repository + "@" + d
		if slices.Contains(names, name) {
			continue
		}
		if g.cfg.Store == nil {
			continue // whether a verified pull made it cannot be told
		}
		if _, recorded, err := g.cfg.Store.GetImagePulledRecord(name); err != nil || recorded {
			continue // a verified pull made it, or that cannot be told
		}
		names = append(names, name)
	}
	for _, name := range names {
		if err := rt.RemoveName(ctx, name, img.ID); err != nil {
			logger.Error(err, "Could not remove the name a refused pull created", "name", name, "imageID", img.ID)
			continue
		}
		logger.Info("Removed the name a refused pull created", "name", name, "imageID", img.ID)
	}
	if err := rt.RemoveUnnamed(ctx, img.ID); err != nil {
		logger.Error(err, "Could not remove the unnamed image a refused pull left", "imageID", img.ID)
	}
}

// refuseAfter logs and returns the refusal of a pull the runtime made.
func (g *Gate) refuseAfter(ctx context.Context, req Request, p parsedImage, cause error, reason string) error {
	result := ResultUnverifiedContent
	if errors.Is(cause, ErrPrivateContent) {
		result = ResultPrivateContent
	}
	g.cfg.Metrics.result(result)
	err := &RefusalError{Image: req.Image, Registry: p.host, Pod: req.Pod, After: true, Err: fmt.Errorf("%w: %s", cause, reason)}
	klog.FromContext(ctx).Info("Refused a pull after the runtime made it", "pod", klog.KRef(req.Pod.Namespace, req.Pod.Name),
		"image", req.Image, "registry", p.host, "result", result, "err", err.Err)
	return err
}

func describeDigests(ds []string) string {
	switch len(ds) {
	case 0:
		return "no digest of the image's repository"
	case 1:
		return ds[0]
	default:
		return fmt.Sprint(ds)
	}
}
