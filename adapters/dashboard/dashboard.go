// Package dashboard serves backlog's web dashboard: a single page, built from
// plain HTML, CSS and JavaScript modules embedded in the binary (no build
// step, no CDN), that reads and administers a backlog job server through its
// JSON API (see adapters/httpapi and docs/dashboard.md).
//
// The handler serves only static files; everything the page shows comes from
// the API, which it calls from the browser at Options.APIBase on the same
// origin. Mount it under a prefix that ends in a slash, next to the API:
//
//	mux.Handle("/v1/", api)
//	mux.Handle("/dashboard/", http.StripPrefix("/dashboard", dashboard.Handler(dashboard.Options{})))
//
// The page's screens: overview of queues, queues with their claim policy
// and nodes, one queue's page with its controls, jobs, job detail,
// periodic jobs, workers, unique keys, kinds, and workflows and batches
// (the list, a workflow's steps, a batch's progress and callbacks). It
// polls the API every PollInterval while its tab is visible, and asks for
// a bearer token when the API answers 401; it keeps the token in the
// browser's sessionStorage and sends it in the Authorization header,
// never in a URL.
//
// Every response carries a Content-Security-Policy that allows scripts,
// styles, images and connections from the page's own origin only, plus
// X-Content-Type-Options: nosniff, Referrer-Policy: no-referrer and
// X-Frame-Options: DENY. The HTML is never cached without revalidation;
// assets requested with their content version (the page does this for its
// entry script and stylesheet) are cached for a year.
package dashboard

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed assets
var assetsFS embed.FS

// DefaultAPIBase is the API path the page calls when Options.APIBase is "".
const DefaultAPIBase = "/v1"

// DefaultPollInterval is how often the page polls the API when
// Options.PollInterval is zero.
const DefaultPollInterval = 2 * time.Second

// ErrInvalidOptions is wrapped by the error Options.Validate returns.
var ErrInvalidOptions = errors.New("dashboard: invalid options")

// Options configure Handler. The zero value is ready to use.
type Options struct {
	// APIBase is the path, on the page's own origin, where the JSON API is
	// served, without a trailing slash: "" means DefaultAPIBase ("/v1").
	// It must start with a single "/" (an origin-relative path); absolute
	// URLs are refused because the Content-Security-Policy lets the page
	// connect only to its own origin.
	APIBase string
	// PollInterval is how often the page refreshes the screen it shows
	// while its tab is visible. 0 means DefaultPollInterval (2 s); values
	// below 250 ms are raised to 250 ms.
	PollInterval time.Duration
	// Title is shown in the page's title and header; "" means "backlog".
	Title string
	// Logger receives configuration errors; nil means slog.Default().
	Logger *slog.Logger
}

// Validate reports whether o is usable, returning an error wrapping
// ErrInvalidOptions that names the bad field otherwise. Handler calls it;
// callers may call it first to fail at startup.
func (o Options) Validate() error {
	if o.APIBase != "" {
		b := o.APIBase
		switch {
		case !strings.HasPrefix(b, "/") || strings.HasPrefix(b, "//") || strings.HasPrefix(b, "/\\"):
			return fmt.Errorf("%w: APIBase %q is not an origin-relative path such as /v1", ErrInvalidOptions, b)
		case strings.ContainsAny(b, "?#\\\"'<> \t\r\n"):
			return fmt.Errorf("%w: APIBase %q contains a character not allowed in a path", ErrInvalidOptions, b)
		case b != "/" && strings.HasSuffix(b, "/"):
			return fmt.Errorf("%w: APIBase %q must not end with a slash", ErrInvalidOptions, b)
		}
	}
	if o.PollInterval < 0 {
		return fmt.Errorf("%w: PollInterval %s is negative", ErrInvalidOptions, o.PollInterval)
	}
	if len(o.Title) > 200 {
		return fmt.Errorf("%w: Title is %d bytes, over 200", ErrInvalidOptions, len(o.Title))
	}
	return nil
}

func (o Options) withDefaults() Options {
	if o.APIBase == "" {
		o.APIBase = DefaultAPIBase
	}
	if o.APIBase == "/" {
		o.APIBase = ""
	}
	if o.PollInterval == 0 {
		o.PollInterval = DefaultPollInterval
	}
	o.PollInterval = max(o.PollInterval, 250*time.Millisecond)
	if o.Title == "" {
		o.Title = "backlog"
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	return o
}

// contentSecurityPolicy allows the page's own origin and nothing else: no
// inline script or style, no eval, no plugins, no framing.
const contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; " +
	"connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// asset is one embedded file ready to serve.
type asset struct {
	body        []byte
	contentType string
	etag        string // strong, quoted
	version     string // short content hash, the ?v= value that makes it immutable
}

var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".ico":  "image/x-icon",
	".txt":  "text/plain; charset=utf-8",
}

// handler serves the embedded page.
type handler struct {
	assets map[string]*asset // by path without the leading slash; "" is the page
}

// Handler returns the dashboard's http.Handler. It answers GET and HEAD
// (others get 405): "/" (and "") with the page, "/<file>" with an embedded
// asset, anything else with 404. Request paths are those seen after the
// caller's http.StripPrefix. When opts are invalid (see Options.Validate)
// the error is logged once and every request gets 500 with its text.
func Handler(opts Options) http.Handler {
	if err := opts.Validate(); err != nil {
		log := opts.Logger
		if log == nil {
			log = slog.Default()
		}
		log.Error("dashboard disabled", "err", err)
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			setSecurityHeaders(w.Header())
			http.Error(w, err.Error(), http.StatusInternalServerError)
		})
	}
	h, err := newHandler(opts.withDefaults())
	if err != nil { // only a broken embed: the files are compiled in
		return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			http.Error(w, err.Error(), http.StatusInternalServerError)
		})
	}
	return h
}

func newHandler(opts Options) (*handler, error) {
	sub, err := fs.Sub(assetsFS, "assets")
	if err != nil {
		return nil, err
	}
	h := &handler{assets: map[string]*asset{}}
	var page []byte
	err = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(sub, p)
		if err != nil {
			return err
		}
		if p == "index.html" {
			page = b
			return nil
		}
		ct, ok := contentTypes[path.Ext(p)]
		if !ok {
			ct = "application/octet-stream"
		}
		h.assets[p] = newAsset(b, ct)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("dashboard: read embedded assets: %w", err)
	}
	tmpl, err := template.New("index.html").Parse(string(page))
	if err != nil {
		return nil, fmt.Errorf("dashboard: parse index.html: %w", err)
	}
	version := func(name string) string {
		if a := h.assets[name]; a != nil {
			return a.version
		}
		return ""
	}
	var buf bytes.Buffer
	err = tmpl.Execute(&buf, map[string]any{
		"APIBase":      opts.APIBase,
		"PollMillis":   opts.PollInterval.Milliseconds(),
		"Title":        opts.Title,
		"AppVersion":   version("app.js"),
		"StyleVersion": version("app.css"),
	})
	if err != nil {
		return nil, fmt.Errorf("dashboard: render index.html: %w", err)
	}
	h.assets[""] = newAsset(buf.Bytes(), contentTypes[".html"])
	return h, nil
}

func newAsset(b []byte, contentType string) *asset {
	sum := sha256.Sum256(b)
	v := hex.EncodeToString(sum[:])[:16]
	return &asset{body: b, contentType: contentType, etag: `"` + v + `"`, version: v}
}

func setSecurityHeaders(hd http.Header) {
	hd.Set("Content-Security-Policy", contentSecurityPolicy)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Cross-Origin-Opener-Policy", "same-origin")
	hd.Set("Cross-Origin-Resource-Policy", "same-origin")
}

func (h *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	setSecurityHeaders(hd)
	name := strings.TrimPrefix(r.URL.Path, "/")
	if name == "index.html" {
		name = ""
	}
	a := h.assets[name]
	if a == nil {
		hd.Set("Cache-Control", "no-store")
		http.Error(w, "404 page not found", http.StatusNotFound)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD")
		hd.Set("Cache-Control", "no-store")
		http.Error(w, "405 method not allowed", http.StatusMethodNotAllowed)
		return
	}
	hd.Set("Content-Type", a.contentType)
	hd.Set("ETag", a.etag)
	if name != "" && r.URL.Query().Get("v") == a.version {
		hd.Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		hd.Set("Cache-Control", "no-cache")
	}
	// ServeContent answers If-None-Match with 304 and handles HEAD and ranges.
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}
