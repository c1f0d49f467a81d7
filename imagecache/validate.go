package imagecache

import "fmt"

// normalize checks cache and returns it with duplicate images dropped (the
// first one kept) and its pull secret copied; errors match ErrInvalidCache.
func normalize(c ImageCache) (ImageCache, error) {
	if c.Namespace == "" || c.Name == "" {
		return c, fmt.Errorf("%w: namespace and name are required", ErrInvalidCache)
	}
	seen := make(map[string]bool, len(c.Images))
	images := make([]string, 0, len(c.Images))
	for _, img := range c.Images {
		if img == "" {
			return c, fmt.Errorf("%w: %s: empty image", ErrInvalidCache, c.Ref())
		}
		if !seen[img] {
			seen[img] = true
			images = append(images, img)
		}
	}
	c.Images = images
	if c.PullSecret != nil {
		s := *c.PullSecret
		c.PullSecret = &s
	}
	if err := validatePullSecret(c.Ref(), c.PullSecret); err != nil {
		return c, err
	}
	if c.RefreshInterval < 0 {
		return c, fmt.Errorf("%w: %s: negative refresh interval", ErrInvalidCache, c.Ref())
	}
	return c, nil
}
