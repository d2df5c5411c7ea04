package sqlite

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/backlogq/backlog/core/contract"
	"github.com/backlogq/backlog/store"
)

// create=false opens an existing file only: a missing one is an error
// wrapping core.ErrNotFound, and no file is created.
func TestURLCreateFalse(t *testing.T) {
	path := filepath.Join(t.TempDir(), "jobs.db")
	_, err := store.Open(context.Background(), "sqlite:"+path+"?create=false")
	if !errors.Is(err, contract.ErrNotFound) {
		t.Fatalf("missing file: %v; want core.ErrNotFound", err)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the file was created (stat: %v)", err)
	}
	st, err := store.Open(context.Background(), "sqlite:"+path)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	st, err = store.Open(context.Background(), "sqlite:"+path+"?create=false")
	if err != nil {
		t.Fatalf("existing file: %v", err)
	}
	st.Close()
	if _, err := store.Open(context.Background(), "sqlite:"+path+"?create=maybe"); err == nil {
		t.Fatal("create=maybe: no error")
	}
}
