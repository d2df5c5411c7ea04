package cli

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/backlogq/backlog/core/contract"
)

// TestServeRefusesSealedArgsUnlessAccepted: a producer that submits
// another job's sealed args (read back as ciphertext) or a malformed
// envelope gets 400 from backlog serve; with --accept-sealed-args a
// well-formed envelope is stored as given, a malformed one still refused.
func TestServeRefusesSealedArgsUnlessAccepted(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	keys := writeFile(t, dir, "keys", testKeyring(t, "k1")+"\n")
	for _, accept := range []bool{false, true} {
		db := "sqlite:" + filepath.Join(dir, "accept-"+map[bool]string{false: "no", true: "yes"}[accept]+".db")
		args := []string{"--keys-file", keys, "--producer-token", "p", "--admin-token", "a"}
		if accept {
			args = append(args, "--accept-sealed-args")
		}
		_, base := startServe(t, db, nil, args...)
		if code, body := call(t, "POST", base+"/v1/jobs", "p", `{"kind":"pay","args":{"to":"victim"}}`); code != 201 {
			t.Fatalf("submit: %d %s", code, body)
		}
		st := openStore(t, db)
		sealed := string(allJobs(t, st)[0].Args)
		if !contract.IsSealed([]byte(sealed)) {
			t.Fatalf("stored args %s; want sealed", sealed)
		}
		code, body := call(t, "POST", base+"/v1/jobs", "p", `{"kind":"pay","args":`+sealed+`}`)
		if want := map[bool]int{false: 400, true: 201}[accept]; code != want {
			t.Fatalf("--accept-sealed-args %v: a replayed envelope got %d %s; want %d", accept, code, body, want)
		}
		if code, body := call(t, "POST", base+"/v1/jobs", "p", `{"kind":"pay","args":{"backlog_enc":"x"}}`); code != 400 || !strings.Contains(body, "backlog_enc") {
			t.Fatalf("--accept-sealed-args %v: a malformed envelope got %d %s; want 400", accept, code, body)
		}
	}
}
