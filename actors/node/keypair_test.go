package node

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// TestStampSeesReplacement: a file replaced by one of the same size with
// its old modification time (a renewed certificate copied with cp -p, or
// renamed into place) has a new stamp, and an untouched file keeps its.
func TestStampSeesReplacement(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the stamp is size and modification time alone here (fileid_other.go)")
	}
	dir := t.TempDir()
	name, next := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca.pem.new")
	if err := os.WriteFile(name, []byte("certificate A"), 0o600); err != nil {
		t.Fatal(err)
	}
	mod := time.Now().Add(-time.Hour).Truncate(time.Second)
	if err := os.Chtimes(name, mod, mod); err != nil {
		t.Fatal(err)
	}
	before := stampOf(name)
	if again := stampOf(name); again != before {
		t.Fatalf("stamp of an untouched file changed: %+v → %+v", before, again)
	}
	for _, replace := range []struct {
		how string
		do  func() error
	}{
		{"renamed into place", func() error {
			if err := os.WriteFile(next, []byte("certificate B"), 0o600); err != nil {
				return err
			}
			if err := os.Chtimes(next, mod, mod); err != nil {
				return err
			}
			return os.Rename(next, name)
		}},
		{"rewritten, modification time kept", func() error {
			if err := os.WriteFile(name, []byte("certificate C"), 0o600); err != nil {
				return err
			}
			return os.Chtimes(name, mod, mod)
		}},
	} {
		time.Sleep(10 * time.Millisecond) // a change time the clock tells apart
		if err := replace.do(); err != nil {
			t.Fatal(err)
		}
		after := stampOf(name)
		if after == before {
			t.Errorf("%s: the stamp did not change (%+v)", replace.how, after)
		}
		before = after
	}
}
