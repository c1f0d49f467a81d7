package explain

// RedactHash returns a form of a credential hash that tells two hashes apart
// without disclosing them.
func RedactHash(h string) string {
	if h == "" {
		return ""
	}
	if len(h) > 8 {
		return h[:8] + "…"
	}
	return "…"
}
