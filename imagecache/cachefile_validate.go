package imagecache

import (
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/distribution/reference"
)

// cacheFileValidator collects the problems of one cache file.
type cacheFileValidator struct {
	problems []string
}

func (v *cacheFileValidator) addf(format string, args ...any) {
	if len(v.problems) == maxCacheFileProblems {
		v.problems = append(v.problems, "more problems not shown")
	}
	if len(v.problems) > maxCacheFileProblems {
		return
	}
	v.problems = append(v.problems, fmt.Sprintf(format, args...))
}

// The keys a cache file knows, in the order messages list them.
var (
	cacheFileFields  = []string{"namespace", "name", "images", "refreshInterval", "forceFullCache", "pullSecret"}
	secretFileFields = []string{"namespace", "name", "uid", "username", "password", "email"}
)

// cache validates the n-th (1-based) item of a cache file. It returns what
// it could read of the cache, and whether the item had no problem.
func (v *cacheFileValidator) cache(n int, item any) (ImageCache, bool) {
	var c ImageCache
	m, ok := item.(map[string]any)
	if !ok {
		v.addf("cache %d: want a mapping with namespace, name and images, got %s", n, describeValue(item))
		return c, false
	}
	c.Namespace, _ = m["namespace"].(string)
	c.Name, _ = m["name"].(string)
	where := fmt.Sprintf("cache %d", n)
	if c.Namespace != "" && c.Name != "" {
		where += " (" + c.Ref().String() + ")"
	}
	before := len(v.problems)
	v.unknownFields(where, "", m, cacheFileFields)
	v.objectName(where, "namespace", m["namespace"], dns1123Label, 63)
	v.objectName(where, "name", m["name"], dns1123Subdomain, 253)
	c.Images = v.images(where, m["images"])
	if raw, ok := m["refreshInterval"]; ok && raw != nil {
		str, isString := raw.(string)
		if d, err := parseRefreshInterval(str); !isString || err != nil || d < 0 {
			v.addf("%s: refreshInterval %s: want a duration such as 30m, 24h or 7d", where, describeValue(raw))
		} else {
			c.RefreshInterval = d
		}
	}
	if raw, ok := m["forceFullCache"]; ok && raw != nil {
		b, isBool := raw.(bool)
		if !isBool {
			v.addf("%s: forceFullCache %s: want true or false", where, describeValue(raw))
		}
		c.ForceFullCache = b
	}
	if raw, ok := m["pullSecret"]; ok && raw != nil {
		c.PullSecret = v.secret(where, raw)
	}
	return c, len(v.problems) == before
}

func (v *cacheFileValidator) unknownFields(where, prefix string, m map[string]any, known []string) {
	var unknown []string
	for k := range m {
		if !slices.Contains(known, k) {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		v.addf("%s: unknown field %s%s (known: %s)", where, prefix, strconv.Quote(k), strings.Join(known, ", "))
	}
}

var (
	dns1123Label     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dns1123Subdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// objectName checks a Kubernetes namespace (a DNS label) or object name (a
// DNS subdomain).
func (v *cacheFileValidator) objectName(where, field string, raw any, re *regexp.Regexp, maxLen int) {
	s, ok := raw.(string)
	switch {
	case raw == nil || (ok && s == ""):
		v.addf("%s: %s: required", where, field)
	case !ok:
		hint := ""
		if _, isBool := raw.(bool); isBool {
			hint = ` (YAML reads an unquoted y, yes, on, n, no or off as a boolean: quote the name, as "y")`
		}
		v.addf("%s: %s %s: want a string%s", where, field, describeValue(raw), hint)
	case len(s) > maxLen || !re.MatchString(s):
		what := "lowercase letters, digits and '-'"
		if re == dns1123Subdomain {
			what = "lowercase letters, digits, '-' and '.'"
		}
		v.addf("%s: %s %s: not a Kubernetes %s (%s, starting and ending with a letter or digit, at most %d characters)",
			where, field, strconv.Quote(s), field, what, maxLen)
	}
}

// images checks the image list: a non-empty list of image references the
// kubelet accepts, each listed once (compared fully qualified, so nginx:1.27
// and docker.io/library/nginx:1.27 are the same image).
func (v *cacheFileValidator) images(where string, raw any) []string {
	list, ok := raw.([]any)
	switch {
	case raw == nil:
		v.addf("%s: images: required (a list such as [nginx:1.27])", where)
		return nil
	case !ok:
		v.addf("%s: images: want a list of image references, got %s", where, describeValue(raw))
		return nil
	case len(list) == 0:
		v.addf("%s: images: empty; list at least one image (or delete the cache)", where)
		return nil
	}
	out := make([]string, 0, len(list))
	seen := map[string]int{}
	for i, item := range list {
		field := fmt.Sprintf("images[%d]", i)
		img, ok := item.(string)
		if !ok {
			v.addf("%s: %s %s: want an image reference such as nginx:1.27", where, field, describeValue(item))
			continue
		}
		canonical, err := checkImageReference(img)
		if err != nil {
			v.addf("%s: %s %s: %v", where, field, strconv.Quote(img), err)
			continue
		}
		if first, dup := seen[canonical]; dup {
			v.addf("%s: %s %s: the same image as images[%d]; list each image once", where, field, strconv.Quote(img), first)
			continue
		}
		seen[canonical] = i
		out = append(out, img)
	}
	return out
}

// checkImageReference returns the fully qualified form of an image
// reference, or why it is not one the kubelet would pull.
func checkImageReference(img string) (string, error) {
	if img == "" {
		return "", errors.New("empty")
	}
	named, err := reference.ParseNormalizedNamed(img)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), reference.ErrReferenceInvalidFormat.Error()+": ")
		if msg == reference.ErrReferenceInvalidFormat.Error() {
			msg = "not an image reference (want [registry/]repository[:tag][@digest], such as nginx:1.27)"
		}
		return "", errors.New(msg)
	}
	if _, err := reference.Parse(img); err != nil {
		return "", errors.New("not an image reference the kubelet accepts")
	}
	return reference.TagNameOnly(named).String(), nil
}

// secret checks a pull secret: the coordinates of the Kubernetes secret
// (namespace, name and UID, which the kubelet records) are required. A
// value that is not a string is reported without being shown: it may be a
// credential.
func (v *cacheFileValidator) secret(where string, raw any) *PullSecret {
	m, ok := raw.(map[string]any)
	if !ok {
		v.addf("%s: pullSecret: want a mapping with namespace, name, uid, username and password, got %s", where, describeValue(raw))
		return nil
	}
	v.unknownFields(where, "pullSecret.", m, secretFileFields)
	get := func(field string, required bool, hint string) string {
		val, present := m[field]
		s, isString := val.(string)
		switch {
		case present && val != nil && !isString:
			v.addf("%s: pullSecret.%s: want a string", where, field)
		case required && s == "":
			v.addf("%s: pullSecret.%s: required%s", where, field, hint)
		}
		return s
	}
	return &PullSecret{
		Namespace: get("namespace", true, ""),
		Name:      get("name", true, ""),
		UID:       get("uid", true, " (the secret's metadata.uid, which the kubelet records: kubectl get secret NAME -n NAMESPACE -o jsonpath='{.metadata.uid}')"),
		Username:  get("username", false, ""),
		Password:  get("password", false, ""),
		Email:     get("email", false, ""),
	}
}

// describeValue names a parsed YAML/JSON value's kind for messages, without
// printing long values, nor any value of a mapping or list.
func describeValue(v any) string {
	switch t := v.(type) {
	case nil:
		return "null"
	case string:
		if len(t) > 60 {
			t = t[:60] + "…"
		}
		return strconv.Quote(t)
	case bool:
		return strconv.FormatBool(t)
	case json.Number:
		return t.String()
	case []any:
		return "a list"
	case map[string]any:
		return "a mapping"
	}
	return fmt.Sprintf("%T", v)
}

// parseRefreshInterval parses a refresh interval: a Go duration (30m, 24h)
// or a whole number of days (7d), at most 10000.
func parseRefreshInterval(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || n > 10000 {
			return 0, fmt.Errorf("bad number of days %q", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}
