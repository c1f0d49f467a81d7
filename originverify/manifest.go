package originverify

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strings"

	"github.com/opencontainers/go-digest"
)

// The manifest media types a verification fetches and walks.
const (
	mediaTypeOCIIndex         = "application/vnd.oci.image.index.v1+json"
	mediaTypeOCIManifest      = "application/vnd.oci.image.manifest.v1+json"
	mediaTypeDockerList       = "application/vnd.docker.distribution.manifest.list.v2+json"
	mediaTypeDockerManifest   = "application/vnd.docker.distribution.manifest.v2+json"
	mediaTypeDockerSchema1    = "application/vnd.docker.distribution.manifest.v1+json"
	mediaTypeDockerSchema1JWS = "application/vnd.docker.distribution.manifest.v1+prettyjws"
)

// manifestAccept is the Accept header of every manifest request: the OCI
// and Docker schema 2 indexes and manifests (schema 1 is not asked for; it
// names layers by tarsum, which cannot be proven).
var manifestAccept = http.Header{"Accept": {strings.Join([]string{
	mediaTypeOCIIndex, mediaTypeOCIManifest, mediaTypeDockerList, mediaTypeDockerManifest,
}, ", ")}}

const (
	// maxManifestBytes bounds a manifest body, as containerd does.
	maxManifestBytes = 4 << 20
	// maxManifests bounds the manifests one verification fetches.
	maxManifests = 64
	// maxIndexDepth bounds the nesting of indexes: the image's manifest
	// is at depth 0, and an index at depth maxIndexDepth is refused (at
	// most three levels of index).
	maxIndexDepth = 3
)

// descriptor is the part of an OCI descriptor a verification reads.
type descriptor struct {
	MediaType string         `json:"mediaType"`
	Digest    string         `json:"digest"`
	Size      int64          `json:"size"`
	Platform  *indexPlatform `json:"platform,omitempty"`
}

// manifestDoc is an image manifest or an index, as far as a verification
// reads it.
type manifestDoc struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Config        *descriptor  `json:"config"`
	Layers        []descriptor `json:"layers"`
	Manifests     []descriptor `json:"manifests"`
}

type manifestKind int

const (
	kindImage manifestKind = iota + 1
	kindIndex
)

// kindOf gives the kind a media type names, 0 when it is not one walked.
func kindOf(mediaType string) manifestKind {
	switch mediaType {
	case mediaTypeOCIManifest, mediaTypeDockerManifest:
		return kindImage
	case mediaTypeOCIIndex, mediaTypeDockerList:
		return kindIndex
	}
	return 0
}

// parseManifest parses body, served as (or named by its descriptor as)
// mediaType. The kind is the media type's, else the body's mediaType
// field's; a body whose fields or own media type contradict that kind is
// refused, as containerd refuses it. why is the refusal, "" when usable.
func parseManifest(body []byte, mediaType string) (doc manifestDoc, kind manifestKind, why string) {
	if err := json.Unmarshal(body, &doc); err != nil {
		return doc, 0, "the served bytes are not a manifest"
	}
	if mt, _, err := mime.ParseMediaType(mediaType); err == nil {
		mediaType = mt
	}
	if doc.SchemaVersion == 1 || mediaType == mediaTypeDockerSchema1 || mediaType == mediaTypeDockerSchema1JWS || doc.MediaType == mediaTypeDockerSchema1 || doc.MediaType == mediaTypeDockerSchema1JWS {
		return doc, 0, "a schema 1 manifest cannot be proven"
	}
	kind = kindOf(mediaType)
	if own := kindOf(doc.MediaType); kind == 0 {
		kind = own
	} else if doc.MediaType != "" && own != kind {
		return doc, 0, fmt.Sprintf("served as %s but its mediaType is %s", mediaType, truncate(printable(doc.MediaType), 80))
	}
	switch {
	case kind == 0:
		return doc, 0, fmt.Sprintf("media type %q is not an image manifest or index", truncate(printable(mediaType), 80))
	case kind == kindImage && len(doc.Manifests) > 0:
		return doc, 0, "an image manifest that lists manifests"
	case kind == kindIndex && (doc.Config != nil || len(doc.Layers) > 0):
		return doc, 0, "an index that names a config or layers"
	case kind == kindImage && doc.Config == nil:
		return doc, 0, "an image manifest without a config"
	}
	return doc, kind, ""
}

// walk proves the manifest dgst (already fetched and hashed, body) and
// what it names: for an index, the children the runtime would use (the
// node's platforms, and any child the node holds), for an image manifest
// its config and layers the node holds.
func (s *session) walk(ctx context.Context, dgst digest.Digest, body []byte, mediaType string, depth int) *OriginError {
	doc, kind, why := parseManifest(body, mediaType)
	if why != "" {
		return s.notProven(http.StatusOK, "manifest "+short(dgst), why)
	}
	if kind == kindImage {
		if oe := s.challengeBlob(ctx, dgst, doc.Config, "config"); oe != nil {
			return oe
		}
		for i := range doc.Layers {
			if oe := s.challengeBlob(ctx, dgst, &doc.Layers[i], fmt.Sprintf("layer %d", i+1)); oe != nil {
				return oe
			}
		}
		return nil
	}
	what := "index " + short(dgst)
	if depth >= maxIndexDepth {
		return s.notProven(http.StatusOK, what, fmt.Sprintf("indexes nested deeper than %d cannot be proven", maxIndexDepth))
	}
	for i := range doc.Manifests {
		child := &doc.Manifests[i]
		d, err := digest.Parse(child.Digest)
		if err != nil {
			return s.notProven(http.StatusOK, what, fmt.Sprintf("manifest %d names an invalid digest", i+1))
		}
		if s.seen[d.String()] {
			continue
		}
		local, held, haveBytes := s.held(ctx, d)
		if !wanted(child.Platform, s.platforms) && !(held && haveBytes) {
			continue
		}
		childWhat := fmt.Sprintf("manifest %s%s of index %s", short(d), platformOf(child.Platform), short(dgst))
		if haveBytes && local != child.Size {
			return s.notProven(http.StatusOK, childWhat, fmt.Sprintf("size %d in the index, the node holds %d bytes", child.Size, local))
		}
		if s.manifests >= maxManifests {
			return s.notProven(http.StatusOK, what, fmt.Sprintf("more than %d manifests to prove; a verification fetches at most %d", maxManifests, maxManifests))
		}
		s.seen[d.String()] = true
		childBody, oe := s.fetchManifest(ctx, d, child.Size, childWhat)
		if oe != nil {
			return oe
		}
		if oe := s.walk(ctx, d, childBody, child.MediaType, depth+1); oe != nil {
			return oe
		}
	}
	return nil
}

// fetchManifest GETs the manifest d an index names (size bytes) and checks
// its bytes hash to d.
func (s *session) fetchManifest(ctx context.Context, d digest.Digest, size int64, what string) ([]byte, *OriginError) {
	resp, oe := s.get(ctx, "/manifests/"+d.String(), manifestAccept)
	if oe != nil {
		return nil, oe
	}
	if resp.StatusCode != http.StatusOK {
		return nil, s.answerFailure(resp, what)
	}
	body, over, oe := s.readAtMost(ctx, resp, maxManifestBytes, what)
	if oe != nil {
		return nil, oe
	}
	s.manifests++
	switch got := d.Algorithm().FromBytes(body); {
	case over:
		return nil, s.notProven(http.StatusOK, what, fmt.Sprintf("the manifest is over %d bytes", maxManifestBytes))
	case got != d:
		return nil, s.notProven(http.StatusOK, what, "the served bytes hash to "+short(got))
	case int64(len(body)) != size:
		return nil, s.notProven(http.StatusOK, what, fmt.Sprintf("%d bytes served, the index says %d", len(body), size))
	}
	return body, nil
}

// held tells whether the node holds blob d, its size there, and whether
// its bytes can be read. Without a Content, or when it cannot be asked,
// every blob counts as held with no bytes to compare (the safe side: it is
// fetched whole).
func (s *session) held(ctx context.Context, d digest.Digest) (size int64, held, haveBytes bool) {
	if s.content == nil {
		return 0, true, false
	}
	size, ok, err := s.content.Size(ctx, d.String())
	if err != nil {
		return 0, true, false
	}
	return size, ok, ok
}

// short is a digest cut for messages: "sha256:" and 12 hex digits.
func short[D ~string](d D) string {
	s := string(d)
	algorithm, hex, ok := strings.Cut(s, ":")
	if !ok || len(hex) <= 12 {
		return truncate(printable(s), 80)
	}
	return truncate(printable(algorithm), 20) + ":" + hex[:12] + "…"
}

// platformOf names a child's platform for messages.
func platformOf(p *indexPlatform) string {
	if p == nil {
		return ""
	}
	name := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		name += "/" + p.Variant
	}
	return " (" + truncate(printable(name), 40) + ")"
}
