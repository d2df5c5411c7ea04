package cli

import (
	"net/http"
	"strings"
	"testing"
)

// TestServeRefusesUnknownKinds: by default serve refuses a kind neither
// its handlers nor a live registered worker handles (a typo, a JSON
// object given as the kind), and accepts it once a worker announcing it
// registers.
func TestServeRefusesUnknownKinds(t *testing.T) {
	db := tempDB(t)
	_, base := startServe(t, db, nil, "--handler", "local=true")
	if code, body := call(t, "POST", base+"/v1/jobs", "", `{"kind":"local"}`); code != http.StatusCreated {
		t.Fatalf("submit of a handled kind: %d %s", code, body)
	}
	for _, kind := range []string{`remote`, `{\"name\":\"x\"}`} {
		code, body := call(t, "POST", base+"/v1/jobs", "", `{"kind":"`+kind+`"}`)
		if code != http.StatusUnprocessableEntity || !strings.Contains(body, "unknown-kind") {
			t.Fatalf("submit of the unknown kind %s: %d %s", kind, code, body)
		}
	}
	if code, body := call(t, "PUT", base+"/v1/workers/w1", "", `{"queues":["default"],"kinds":["remote"]}`); code != http.StatusOK {
		t.Fatalf("register: %d %s", code, body)
	}
	if code, body := call(t, "POST", base+"/v1/jobs", "", `{"kind":"remote"}`); code != http.StatusCreated {
		t.Fatalf("submit of a kind a worker announced: %d %s", code, body)
	}
}

// TestServeAllowUnknownKinds: --allow-unknown-kinds accepts every kind.
func TestServeAllowUnknownKinds(t *testing.T) {
	db := tempDB(t)
	_, base := startServe(t, db, nil, "--handler", "local=true", "--allow-unknown-kinds")
	if code, body := call(t, "POST", base+"/v1/jobs", "", `{"kind":"remote"}`); code != http.StatusCreated {
		t.Fatalf("submit of a kind for remote workers: %d %s", code, body)
	}
}

// TestEnqueueRefusesUnknownKinds: on the store (--db), enqueue refuses a
// kind that no live worker handles once workers announced theirs (here a
// serve node running "local"): a typo, a JSON object given as the kind;
// --allow-unknown-kinds enqueues it.
func TestEnqueueRefusesUnknownKinds(t *testing.T) {
	db := tempDB(t)
	startServe(t, db, nil, "--handler", "local=true")
	if r := cli(t, db, "enqueue", "local"); r.code != 0 {
		t.Fatalf("enqueue of a handled kind: %s", r)
	}
	for _, kind := range []string{"loacl", `{"name":"x"}`} {
		r := cli(t, db, "enqueue", kind)
		if r.code == 0 || !strings.Contains(r.stderr, "no handler registered for kind") {
			t.Fatalf("enqueue of the unknown kind %s: %s", kind, r)
		}
	}
	if r := cli(t, db, "enqueue", "later", "--allow-unknown-kinds"); r.code != 0 {
		t.Fatalf("enqueue --allow-unknown-kinds: %s", r)
	}
}
