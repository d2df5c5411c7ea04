package dashboard

import (
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"
	"time"
)

func serve(t *testing.T, h http.Handler, method, target string, hdr map[string]string) *http.Response {
	t.Helper()
	req := httptest.NewRequest(method, target, nil)
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec.Result()
}

func body(t *testing.T, res *http.Response) string {
	t.Helper()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func checkSecurityHeaders(t *testing.T, res *http.Response) {
	t.Helper()
	csp := res.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'self'", "script-src 'self'", "connect-src 'self'", "object-src 'none'", "frame-ancestors 'none'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "unsafe") || strings.Contains(csp, "http:") || strings.Contains(csp, "https:") || strings.Contains(csp, "*") {
		t.Errorf("Content-Security-Policy %q allows more than the page's origin", csp)
	}
	if got := res.Header.Get("X-Content-Type-Options"); got != "nosniff" {
		t.Errorf("X-Content-Type-Options = %q", got)
	}
	if got := res.Header.Get("Referrer-Policy"); got != "no-referrer" {
		t.Errorf("Referrer-Policy = %q", got)
	}
	if got := res.Header.Get("X-Frame-Options"); got != "DENY" {
		t.Errorf("X-Frame-Options = %q", got)
	}
}

func TestPageAndAssets(t *testing.T) {
	h := Handler(Options{})
	res := serve(t, h, "GET", "/", nil)
	page := body(t, res)
	if res.StatusCode != 200 || res.Header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Fatalf("GET / = %d %q", res.StatusCode, res.Header.Get("Content-Type"))
	}
	checkSecurityHeaders(t, res)
	if cc := res.Header.Get("Cache-Control"); cc != "no-cache" {
		t.Errorf("page Cache-Control = %q, want no-cache", cc)
	}
	if !strings.Contains(page, `<meta name="backlog-api-base" content="/v1">`) || !strings.Contains(page, `content="2000"`) {
		t.Errorf("page lacks the default configuration:\n%s", page)
	}
	if strings.Contains(page, "<script>") || strings.Contains(page, " style=") || strings.Contains(page, "http://") || strings.Contains(page, "https://") {
		t.Errorf("page has inline script/style or an external URL:\n%s", page)
	}

	// The page references its entry script and stylesheet with a version;
	// those URLs are cacheable for good, the same files without it are not.
	for _, name := range []string{"app.js", "app.css"} {
		m := regexp.MustCompile(regexp.QuoteMeta(name) + `\?v=([0-9a-f]{16})"`).FindStringSubmatch(page)
		if m == nil {
			t.Fatalf("page does not reference %s with a version", name)
		}
		res := serve(t, h, "GET", "/"+name+"?v="+m[1], nil)
		b := body(t, res)
		if res.StatusCode != 200 || len(b) == 0 {
			t.Fatalf("GET %s = %d", name, res.StatusCode)
		}
		checkSecurityHeaders(t, res)
		if cc := res.Header.Get("Cache-Control"); !strings.Contains(cc, "immutable") {
			t.Errorf("%s?v= Cache-Control = %q", name, cc)
		}
		res = serve(t, h, "GET", "/"+name+"?v=stale", nil)
		if cc := res.Header.Get("Cache-Control"); cc != "no-cache" {
			t.Errorf("%s?v=stale Cache-Control = %q", name, cc)
		}
		etag := res.Header.Get("ETag")
		res = serve(t, h, "GET", "/"+name, map[string]string{"If-None-Match": etag})
		if res.StatusCode != http.StatusNotModified {
			t.Errorf("%s with If-None-Match %s = %d, want 304", name, etag, res.StatusCode)
		}
	}

	types := map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8"}
	err := fs.WalkDir(assetsFS, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, ".html") {
			return err
		}
		name := strings.TrimPrefix(p, "assets/")
		res := serve(t, h, "GET", "/"+name, nil)
		if res.StatusCode != 200 {
			t.Errorf("GET /%s = %d", name, res.StatusCode)
		}
		for ext, ct := range types {
			if strings.HasSuffix(name, ext) && res.Header.Get("Content-Type") != ct {
				t.Errorf("GET /%s Content-Type = %q, want %q", name, res.Header.Get("Content-Type"), ct)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestNotFoundAndMethods(t *testing.T) {
	h := Handler(Options{})
	for _, p := range []string{"/nope.js", "/assets/app.js", "/../dashboard.go", "/index.htm", "/dashboard.go"} {
		res := serve(t, h, "GET", p, nil)
		if res.StatusCode != 404 {
			t.Errorf("GET %s = %d, want 404", p, res.StatusCode)
		}
		checkSecurityHeaders(t, res)
	}
	res := serve(t, h, "POST", "/", nil)
	if res.StatusCode != 405 || res.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST / = %d Allow %q", res.StatusCode, res.Header.Get("Allow"))
	}
	res = serve(t, h, "HEAD", "/app.js", nil)
	if res.StatusCode != 200 || body(t, res) != "" {
		t.Errorf("HEAD /app.js = %d", res.StatusCode)
	}
}

func TestOptions(t *testing.T) {
	h := Handler(Options{APIBase: "/api/v1", PollInterval: 5 * time.Second, Title: `ops <"quoted">`})
	page := body(t, serve(t, h, "GET", "/", nil))
	if !strings.Contains(page, `content="/api/v1"`) || !strings.Contains(page, `content="5000"`) {
		t.Errorf("options not in page:\n%s", page)
	}
	if strings.Contains(page, `<"quoted">`) || !strings.Contains(page, "ops &lt;&#34;quoted&#34;&gt;") {
		t.Errorf("title not escaped:\n%s", page)
	}

	for _, bad := range []Options{
		{APIBase: "https://elsewhere.example/v1"},
		{APIBase: "//elsewhere.example/v1"},
		{APIBase: "v1"},
		{APIBase: "/v1/"},
		{APIBase: `/v1"><script>`},
		{PollInterval: -time.Second},
	} {
		err := bad.Validate()
		if !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("Validate(%+v) = %v, want ErrInvalidOptions", bad, err)
			continue
		}
		res := serve(t, Handler(bad), "GET", "/", nil)
		if res.StatusCode != 500 || !strings.Contains(body(t, res), "invalid options") {
			t.Errorf("Handler(%+v) GET / = %d, want 500", bad, res.StatusCode)
		}
	}
	if err := (Options{APIBase: "/"}).Validate(); err != nil {
		t.Errorf("APIBase / refused: %v", err)
	}
}

// TestAssetsBuildNoMarkupFromData guards the rule that API data reaches the
// page only as text: the scripts never parse strings as HTML.
func TestAssetsBuildNoMarkupFromData(t *testing.T) {
	forbidden := regexp.MustCompile(`innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|createContextualFragment|DOMParser|setHTML|srcdoc`)
	err := fs.WalkDir(assetsFS, "assets", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".js") {
			return err
		}
		b, err := assetsFS.ReadFile(p)
		if err != nil {
			return err
		}
		for i, line := range strings.Split(string(b), "\n") {
			if forbidden.MatchString(line) {
				t.Errorf("%s:%d builds markup from strings: %s", p, i+1, strings.TrimSpace(line))
			}
			// The SVG namespace name is an identifier, never fetched.
			rest := strings.ReplaceAll(line, "'http://www.w3.org/2000/svg'", "")
			if strings.Contains(rest, "http://") || strings.Contains(rest, "https://") {
				t.Errorf("%s:%d refers to another origin: %s", p, i+1, strings.TrimSpace(line))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
