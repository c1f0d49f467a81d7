package pullmanager

import (
	"context"

	"github.com/distribution/reference"
	"k8s.io/klog/v2"

	"github.com/pullrecords/pullrecords/imageruntime"
)

// initialize is the start-up recovery of leftover intents (kubelet
// behaviour). An intent left by a previous process
// means a pull may have finished without being recorded. Every leftover
// intent whose image the runtime now has becomes a pulled record for the
// runtime's image ID with no credentials (an existing record is left as it
// is), and the intent is then deleted. Intents matching nothing stay. Intent
// counters are not rebuilt.
//
// As upstream, the raw intent string must equal one of the runtime's
// RepoTags or RepoDigests, so "busybox" never matches
// "docker.io/library/busybox:latest" and such an intent stays, marking the
// image as pulled by the kubelet. With WithNormalizedImageNames both sides
// are normalised first, so such intents are converted too.
func (m *PullManager) initialize(ctx context.Context) {
	logger := klog.FromContext(ctx)
	intents, err := m.records.ListImagePullIntents()
	if err != nil {
		logger.Error(err, "There were errors listing image pull intents, continuing with an incomplete records list")
	}
	if len(intents) == 0 {
		return
	}
	var images []imageruntime.Image
	if m.images != nil {
		if images, err = m.images.ListImages(ctx); err != nil {
			logger.Error(err, "Failed to list images")
			images = nil
		}
	}
	// Map every form of every runtime reference to the image ID.
	idByRef := make(map[string]string)
	for _, img := range images {
		for _, refs := range [][]string{img.RepoTags, img.RepoDigests} {
			for _, r := range refs {
				for _, form := range m.referenceForms(r) {
					if _, dup := idByRef[form]; !dup {
						idByRef[form] = img.ID
					}
				}
			}
		}
	}
	for _, intent := range intents {
		id := ""
		for _, form := range m.referenceForms(intent.Image) {
			if v, ok := idByRef[form]; ok {
				id = v
				break
			}
		}
		if id == "" {
			continue
		}
		if _, err := m.writeRecordIfChanged(logger, intent.Image, id, nil); err != nil {
			logger.Error(err, "Failed to write the image pulled record for a leftover intent", "image", intent.Image, "imageRef", id)
			continue
		}
		if err := m.records.DeleteImagePullIntent(logger, intent.Image); err != nil {
			logger.V(2).Info("Failed to remove image pull intent file", "imageName", intent.Image, "error", err)
		}
	}
}

// referenceForms returns the strings under which ref is matched at start-up:
// ref itself and, with WithNormalizedImageNames only, its normalised form with the default tag added when it has
// neither tag nor digest ("busybox" -> "docker.io/library/busybox:latest"),
// and, when it has a digest, "name@digest" (so "busybox:1@sha256:…" matches
// the runtime's "docker.io/library/busybox@sha256:…").
func (m *PullManager) referenceForms(ref string) []string {
	forms := []string{ref}
	if !m.normalizedNames {
		return forms
	}
	named, err := reference.ParseNormalizedNamed(ref)
	if err != nil {
		return forms
	}
	forms = append(forms, reference.TagNameOnly(named).String())
	if d, ok := named.(reference.Digested); ok {
		forms = append(forms, named.Name()+"@"+d.Digest().String())
	}
	return forms
}
