package cli

import (
	"net/http"
	"strings"
	"testing"
)

// TestServeQueuesFromConfigOnly: with --queues-from-config-only serve
// accepts jobs only for its configured queues.
func TestServeQueuesFromConfigOnly(t *testing.T) {
	db := tempDB(t)
	_, base := startServe(t, db, nil, "--queue", "mail=2", "--queues-from-config-only")
	if code, body := call(t, "POST", base+"/v1/jobs", "", `{"kind":"k","queue":"mail"}`); code != http.StatusCreated {
		t.Fatalf("submit to a configured queue: %d %s", code, body)
	}
	code, body := call(t, "POST", base+"/v1/jobs", "", `{"kind":"k","queue":"spam1"}`)
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "queue-not-allowed") {
		t.Fatalf("submit to another queue: %d %s", code, body)
	}
}

// TestServeMaxQueues: --max-queues caps the queues submissions create.
func TestServeMaxQueues(t *testing.T) {
	db := tempDB(t)
	_, base := startServe(t, db, nil, "--max-queues", "2")
	for _, q := range []string{"a", "b", "a"} {
		if code, body := call(t, "POST", base+"/v1/jobs", "", `{"kind":"k","queue":"`+q+`"}`); code != http.StatusCreated {
			t.Fatalf("submit to queue %s: %d %s", q, code, body)
		}
	}
	code, body := call(t, "POST", base+"/v1/jobs", "", `{"kind":"k","queue":"c"}`)
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "too-many-queues") {
		t.Fatalf("submit creating a third queue: %d %s", code, body)
	}
}
