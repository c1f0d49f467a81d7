package containerdapi

import (
	"context"
	"fmt"

	"google.golang.org/grpc"
	"k8s.io/klog/v2"
)

// Images reads and removes image names in one containerd namespace, never
// content. It is safe for concurrent use.
type Images struct {
	c client
}

// NewImages returns an Images that calls containerd's images service on
// conn (dialled and closed by the caller) in namespace; an empty namespace
// is DefaultNamespace.
func NewImages(conn *grpc.ClientConn, namespace string) *Images {
	return &Images{c: newClient(conn, namespace)}
}

// Target returns the manifest digest the name points to; ok=false when there is no such name.
// name is containerd's image name, as the CRI plugin writes it: a full
// reference ("docker.io/library/busybox:1.36", "host/repo@sha256:...").
func (i *Images) Target(ctx context.Context, name string) (digest string, ok bool, err error) {
	im, ok, err := i.get(ctx, name)
	if err != nil || !ok {
		return "", false, err
	}
	return im.Target.Digest, true, nil
}

// get calls Images/Get; ok=false for NotFound.
func (i *Images) get(ctx context.Context, name string) (image, bool, error) {
	if name == "" {
		return image{}, false, fmt.Errorf("containerd images Get: %w: empty name", ErrInvalidArgument)
	}
	resp, err := i.c.invoke(ctx, methodGet, appendString(nil, fieldRequestDigestOrName, name))
	if err != nil {
		if isNotFound(err) {
			return image{}, false, nil
		}
		return image{}, false, callError("images Get", name, err)
	}
	b, found, err := embedded(resp, fieldResponseObject)
	if err == nil && !found {
		err = fmt.Errorf("%w: no image in the answer", ErrBadResponse)
	}
	var im image
	if err == nil {
		im, err = unmarshalImage(b)
	}
	if err == nil && (im.Name != name || im.Target.Digest == "") {
		err = fmt.Errorf("%w: image %q with target %q", ErrBadResponse, im.Name, im.Target.Digest)
	}
	if err != nil {
		return image{}, false, fmt.Errorf("containerd images Get of %s: %w", name, err)
	}
	return im, true, nil
}

// RemoveName removes the name if, and only if, it points to target (a manifest digest). A name
// already gone is not an error; a name that points elsewhere is ErrNameMoved (wrapped), untouched.
//
// It reads the name first and deletes it only when it points to target;
// the delete carries target as containerd 2.x's guard (the name is deleted
// only if it still points there), which containerd 1.6 ignores: on 1.6 a
// name re-pointed between the read and the delete is deleted. The delete
// is asynchronous for the garbage collector (sync=false): content no other
// name or lease references is collected later, as containerd does after
// any image removal.
func (i *Images) RemoveName(ctx context.Context, name, target string) error {
	if target == "" {
		return fmt.Errorf("containerd images Delete of %s: %w: empty target", name, ErrInvalidArgument)
	}
	im, ok, err := i.get(ctx, name)
	if err != nil {
		return err
	}
	if !ok {
		return nil
	}
	if im.Target.Digest != target {
		return movedError(name, target, im.Target.Digest)
	}
	req := appendString(nil, fieldRequestDigestOrName, name)
	req = appendMessage(req, fieldDeleteTarget, im.Target.marshal())
	if _, err := i.c.invoke(ctx, methodDelete, req); err != nil {
		if !isNotFound(err) {
			return callError("images Delete", name, err)
		}
		// Gone meanwhile, or (2.x) moved meanwhile: ask again.
		now, ok, gerr := i.get(ctx, name)
		switch {
		case gerr != nil:
			return gerr
		case !ok:
			return nil
		case now.Target.Digest != target:
			return movedError(name, target, now.Target.Digest)
		default:
			return callError("images Delete", name, err)
		}
	}
	klog.FromContext(ctx).V(2).Info("Removed an image name", "name", name, "target", target)
	return nil
}

func movedError(name, target, now string) error {
	return fmt.Errorf("containerd images Delete of %s: %w: it points to %s, not %s; left as it is", name, ErrNameMoved, now, target)
}
