package cli

import (
	"net/http"
	"strings"
	"testing"
)

// TestServeRejectUnknownKinds: with --reject-unknown-kinds serve refuses
// a kind neither its handlers nor a registered worker handles, and accepts
// it once a worker announcing it registers; without the flag a serve that
// has handlers still accepts every kind (for remote workers).
func TestServeRejectUnknownKinds(t *testing.T) {
	db := tempDB(t)
	_, base := startServe(t, db, nil, "--handler", "local=true", "--reject-unknown-kinds")
	if code, body := call(t, "POST", base+"/v1/jobs", "", `{"kind":"local"}`); code != http.StatusCreated {
		t.Fatalf("submit of a handled kind: %d %s", code, body)
	}
	code, body := call(t, "POST", base+"/v1/jobs", "", `{"kind":"remote"}`)
	if code != http.StatusUnprocessableEntity || !strings.Contains(body, "unknown-kind") || !strings.Contains(body, `\"remote\"`) {
		t.Fatalf("submit of an unknown kind: %d %s", code, body)
	}
	if code, body := call(t, "PUT", base+"/v1/workers/w1", "", `{"queues":["default"],"kinds":["remote"]}`); code != http.StatusOK {
		t.Fatalf("register: %d %s", code, body)
	}
	if code, body := call(t, "POST", base+"/v1/jobs", "", `{"kind":"remote"}`); code != http.StatusCreated {
		t.Fatalf("submit of a kind a worker announced: %d %s", code, body)
	}
}

func TestServeAcceptsUnknownKindsByDefault(t *testing.T) {
	db := tempDB(t)
	_, base := startServe(t, db, nil, "--handler", "local=true")
	if code, body := call(t, "POST", base+"/v1/jobs", "", `{"kind":"remote"}`); code != http.StatusCreated {
		t.Fatalf("submit of a kind for remote workers: %d %s", code, body)
	}
}
