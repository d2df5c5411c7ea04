package cli

import (
	"net/url"
	"strings"
)

// checkServerURL refuses a job server URL without an http:// or https://
// scheme, such as 127.0.0.1:8080 or localhost:8080, with a usage error
// that suggests the URL with http:// in front. from names the flag or
// variable the URL came from (--server, BACKLOG_SERVER). Other malformed
// URLs are left to the HTTP client, whose error names what is wrong.
func checkServerURL(raw, from string) error {
	s := strings.TrimSpace(raw)
	if s == "" {
		return nil
	}
	if u, err := url.Parse(s); err == nil && u.Host != "" && (strings.EqualFold(u.Scheme, "http") || strings.EqualFold(u.Scheme, "https")) {
		return nil
	}
	if strings.Contains(s, "://") {
		return nil // another scheme: the client names the ones it takes
	}
	return usagef("%s %q has no scheme: did you mean http://%s?", from, raw, strings.TrimPrefix(s, "//"))
}
