package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/distribution/reference"
	"sigs.k8s.io/yaml"

	"github.com/pullrecords/pullrecords/imagecache"
)

// cacheSpec is one image cache as a cache file declares it (YAML or JSON),
// and as the declared-caches file keeps it.
type cacheSpec struct {
	Namespace       string      `json:"namespace"`
	Name            string      `json:"name"`
	Images          []string    `json:"images"`
	ForceFullCache  bool        `json:"forceFullCache,omitempty"`
	RefreshInterval string      `json:"refreshInterval,omitempty"`
	PullSecret      *secretSpec `json:"pullSecret,omitempty"`
}

// secretSpec is a registry credential and the Kubernetes secret it comes from.
type secretSpec struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	UID       string `json:"uid"`
	Username  string `json:"username"`
	Password  string `json:"password"`
	Email     string `json:"email,omitempty"`
}

func (s cacheSpec) ref() string { return s.Namespace + "/" + s.Name }

// imageCache is the manager's form of s; s must have been validated.
func (s cacheSpec) imageCache() imagecache.ImageCache {
	c := imagecache.ImageCache{Namespace: s.Namespace, Name: s.Name, Images: append([]string(nil), s.Images...), ForceFullCache: s.ForceFullCache}
	if s.RefreshInterval != "" {
		c.RefreshInterval, _ = parseInterval(s.RefreshInterval)
	}
	if p := s.PullSecret; p != nil {
		c.PullSecret = &imagecache.PullSecret{Namespace: p.Namespace, Name: p.Name, UID: p.UID,
			Username: p.Username, Password: p.Password, Email: p.Email}
	}
	return c
}

// specOf is the declared form of an applied cache.
func specOf(c imagecache.ImageCache) cacheSpec {
	s := cacheSpec{Namespace: c.Namespace, Name: c.Name, Images: append([]string(nil), c.Images...), ForceFullCache: c.ForceFullCache}
	if c.RefreshInterval > 0 {
		s.RefreshInterval = c.RefreshInterval.String()
	}
	if p := c.PullSecret; p != nil {
		s.PullSecret = &secretSpec{Namespace: p.Namespace, Name: p.Name, UID: p.UID, Username: p.Username, Password: p.Password, Email: p.Email}
	}
	return s
}

// maxCacheFileSize bounds a cache file: it is read whole and parsed, and a
// node's caches fit in far less.
const maxCacheFileSize = 4 << 20

// readLimited reads r (named name in messages), refusing more than limit
// bytes before parsing anything: by its size when it is a regular file,
// else by reading at most limit+1 bytes.
func readLimited(name string, r io.Reader, limit int64) ([]byte, error) {
	tooLarge := func(size string) error {
		return fmt.Errorf("%s is larger than %d MiB (%s); refusing to read it", name, limit>>20, size)
	}
	if f, ok := r.(*os.File); ok {
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > limit {
			return nil, tooLarge(plural(int(fi.Size()), "byte"))
		}
	}
	data, err := io.ReadAll(io.LimitReader(r, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, tooLarge("more than " + plural(int(limit), "byte"))
	}
	return data, nil
}

// cacheFileError is a cache file that does not parse or does not validate:
// every problem found, each naming the cache and the field in the file's
// terms. Nothing of such a file is applied.
type cacheFileError struct {
	file     string
	problems []string
}

func (e *cacheFileError) Error() string {
	if len(e.problems) == 1 {
		return fmt.Sprintf("%s: %s; nothing applied", e.file, e.problems[0])
	}
	return fmt.Sprintf("%s: %d problems (listed above); nothing applied", e.file, len(e.problems))
}

// maxProblems bounds the problems listed for one file.
const maxProblems = 20

// parseCacheFile parses and validates a YAML or JSON list of image caches
// (a single cache is accepted too). Every problem is found before any is
// reported, so a file applies entirely or not at all.
func parseCacheFile(file string, data []byte) ([]cacheSpec, error) {
	fail := func(format string, args ...any) error {
		return &cacheFileError{file: file, problems: []string{fmt.Sprintf(format, args...)}}
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		msg := err.Error()
		if _, rest, ok := strings.Cut(msg, "yaml: "); ok {
			msg = rest
		}
		return nil, fail("not YAML or JSON: %s", msg)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, fail("not YAML or JSON: %v", err)
	}
	var items []any
	switch t := doc.(type) {
	case nil:
		return nil, fail("no image caches")
	case []any:
		items = t
	case map[string]any:
		items = []any{t}
	default:
		return nil, fail("want a list of image caches (\"- namespace: ...\"), got %s", describeValue(doc))
	}
	if len(items) == 0 {
		return nil, fail("no image caches")
	}
	v := &specValidator{}
	specs := make([]cacheSpec, 0, len(items))
	seen := map[string]int{}
	for i, item := range items {
		s, ok := v.cache(i+1, item)
		if s.Namespace != "" && s.Name != "" {
			if first, dup := seen[s.ref()]; dup {
				v.addf("cache %d (%s): the same namespace and name as cache %d; list each cache once", i+1, esc(s.ref()), first)
				continue
			}
			seen[s.ref()] = i + 1
		}
		if ok {
			specs = append(specs, s)
		}
	}
	if len(v.problems) > 0 {
		return nil, &cacheFileError{file: file, problems: v.problems}
	}
	return specs, nil
}

type specValidator struct {
	problems []string
}

func (v *specValidator) addf(format string, args ...any) {
	if len(v.problems) == maxProblems {
		v.problems = append(v.problems, "more problems not shown")
	}
	if len(v.problems) > maxProblems {
		return
	}
	v.problems = append(v.problems, fmt.Sprintf(format, args...))
}

var cacheFields = []string{"namespace", "name", "images", "refreshInterval", "forceFullCache", "pullSecret"}
var secretFields = []string{"namespace", "name", "uid", "username", "password", "email"}

// cache validates the n-th (1-based) item of a cache file.
func (v *specValidator) cache(n int, item any) (cacheSpec, bool) {
	var s cacheSpec
	m, ok := item.(map[string]any)
	if !ok {
		v.addf("cache %d: want a mapping with namespace, name and images, got %s", n, describeValue(item))
		return s, false
	}
	s.Namespace, _ = m["namespace"].(string)
	s.Name, _ = m["name"].(string)
	where := fmt.Sprintf("cache %d", n)
	if s.Namespace != "" && s.Name != "" {
		where += " (" + esc(s.ref()) + ")"
	}
	before := len(v.problems)
	v.unknownFields(where, "", m, cacheFields)
	v.objectName(where, "namespace", m["namespace"], dns1123Label, 63)
	v.objectName(where, "name", m["name"], dns1123Subdomain, 253)
	s.Images = v.images(where, m["images"])
	if raw, ok := m["refreshInterval"]; ok && raw != nil {
		str, isString := raw.(string)
		if d, err := parseInterval(str); !isString || err != nil || d < 0 {
			v.addf("%s: refreshInterval %s: want a duration such as 30m, 24h or 7d", where, describeValue(raw))
		} else {
			s.RefreshInterval = str
		}
	}
	if raw, ok := m["forceFullCache"]; ok && raw != nil {
		b, isBool := raw.(bool)
		if !isBool {
			v.addf("%s: forceFullCache %s: want true or false", where, describeValue(raw))
		}
		s.ForceFullCache = b
	}
	if raw, ok := m["pullSecret"]; ok && raw != nil {
		s.PullSecret = v.secret(where, raw)
	}
	return s, len(v.problems) == before
}

func (v *specValidator) unknownFields(where, prefix string, m map[string]any, known []string) {
	var unknown []string
	for k := range m {
		if !containsString(known, k) {
			unknown = append(unknown, k)
		}
	}
	sort.Strings(unknown)
	for _, k := range unknown {
		v.addf("%s: unknown field %s%s (known: %s)", where, prefix, strconv.Quote(k), strings.Join(known, ", "))
	}
}

func containsString(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}

var (
	dns1123Label     = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)
	dns1123Subdomain = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// objectName checks a Kubernetes namespace (a DNS label) or object name (a
// DNS subdomain).
func (v *specValidator) objectName(where, field string, raw any, re *regexp.Regexp, maxLen int) {
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
// kubelet accepts, each listed once.
func (v *specValidator) images(where string, raw any) []string {
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
		canonical, err := checkImage(img)
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

// checkImage returns the fully qualified form of an image reference, or why
// it is not one the kubelet would pull.
func checkImage(img string) (string, error) {
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
// (namespace, name and UID, which the kubelet records) are required.
func (v *specValidator) secret(where string, raw any) *secretSpec {
	m, ok := raw.(map[string]any)
	if !ok {
		v.addf("%s: pullSecret: want a mapping with namespace, name, uid, username and password, got %s", where, describeValue(raw))
		return nil
	}
	v.unknownFields(where, "pullSecret.", m, secretFields)
	get := func(field string, required bool, hint string) string {
		val, present := m[field]
		s, isString := val.(string)
		switch {
		case present && val != nil && !isString:
			// The value is not shown: it may be a credential.
			v.addf("%s: pullSecret.%s: want a string", where, field)
		case required && s == "":
			v.addf("%s: pullSecret.%s: required%s", where, field, hint)
		}
		return s
	}
	s := &secretSpec{
		Namespace: get("namespace", true, ""),
		Name:      get("name", true, ""),
		UID:       get("uid", true, " (the secret's metadata.uid, which the kubelet records: kubectl get secret NAME -n NAMESPACE -o jsonpath='{.metadata.uid}')"),
		Username:  get("username", false, ""),
		Password:  get("password", false, ""),
		Email:     get("email", false, ""),
	}
	return s
}

// describeValue names a parsed YAML/JSON value's kind for messages, without
// printing long or secret values.
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

// parseInterval parses a refresh interval: a Go duration (30m, 24h) or a
// whole number of days (7d).
func parseInterval(s string) (time.Duration, error) {
	if days, ok := strings.CutSuffix(s, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 0 || n > 10000 {
			return 0, fmt.Errorf("bad number of days %q", s)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	return time.ParseDuration(s)
}
