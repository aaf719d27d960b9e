package main

import (
	"bytes"
	"crypto/x509"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mgrpo/mgrpo/actors/node"
)

// asMainLimited is asMain with writes capped at blocks 512-byte blocks
// per file (`ulimit -f`; bash counts 1024): a write past it fails with
// "file too large", as one on a full disk fails, without root or a
// tmpfs.
func asMainLimited(t *testing.T, blocks int, args ...string) (int, string) {
	t.Helper()
	script := "ulimit -f " + strconv.Itoa(blocks) + ` && exec "$0" "$@"`
	cmd := exec.Command("/bin/sh", append([]string{"-c", script, os.Args[0]}, args...)...)
	cmd.Env = []string{mainEnv + "=1", "PATH=" + os.Getenv("PATH")}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil && cmd.ProcessState == nil {
		t.Fatal(err)
	}
	return cmd.ProcessState.ExitCode(), stderr.String()
}

// snapshot is every file under dir (relative name → content).
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		rel, _ := filepath.Rel(dir, path)
		files[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// onlyEntry fails unless dir holds exactly name: no temporary directory
// left beside it.
func onlyEntry(t *testing.T, dir string, name ...string) {
	t.Helper()
	entries, _ := os.ReadDir(dir)
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	if !slices.Equal(got, name) {
		t.Errorf("%s holds %q, want %q", dir, got, name)
	}
}

func runCertsOK(t *testing.T, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if code := run(append([]string{"certs"}, args...), &stdout, &stderr); code != exitOK {
		t.Fatalf("certs %q: exit %d, stderr %q", args, code, stderr.String())
	}
	return stdout.String()
}

// TestCertsRefusesToReplaceACA: certs over a directory holding a CA is
// refused, one line naming ca.pem, nothing changed (it replaced the CA,
// and so invalidated every node's certificate). With --force the old CA
// and every certificate it signed go, node-3 of 3 too when 1 is asked
// for; other files (a certificate of another CA among them) stay.
func TestCertsRefusesToReplaceACA(t *testing.T) {
	parent := t.TempDir()
	dir, other := filepath.Join(parent, "tls"), filepath.Join(t.TempDir(), "other")
	runCertsOK(t, "--out", dir, "--nodes", "3")
	runCertsOK(t, "--out", other, "--nodes", "1")
	if err := node.AddNodeCert(dir, "extra", nil, time.Now(), time.Now().Add(time.Hour)); err != nil {
		t.Fatal(err)
	}
	for name, from := range map[string]string{"notes.txt": "", "foreign.pem": filepath.Join(other, "node-1.pem")} {
		text := []byte("keep me")
		if from != "" {
			text, _ = os.ReadFile(from)
		}
		if err := os.WriteFile(filepath.Join(dir, name), text, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	before := snapshot(t, dir)

	var stdout, stderr bytes.Buffer
	code := run([]string{"certs", "--out", dir, "--nodes", "3"}, &stdout, &stderr)
	if code != exitUsage || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), filepath.Join(dir, "ca.pem")) ||
		!strings.Contains(stderr.String(), "--force") {
		t.Errorf("certs again: exit %d, stderr %q; want %d and one line naming ca.pem and --force", code, stderr.String(), exitUsage)
	}
	if after := snapshot(t, dir); !maps.Equal(after, before) {
		t.Errorf("a refused certs changed %s", dir)
	}

	out := runCertsOK(t, "--out", dir, "--nodes", "1", "--force")
	if !strings.Contains(out, "the 4 certificates it signed are gone") {
		t.Errorf("certs --force said %q, want it to count the 4 certificates of the old CA", out)
	}
	after := snapshot(t, dir)
	if got := slices.Sorted(maps.Keys(after)); !slices.Equal(got, []string{"ca.key", "ca.pem", "foreign.pem", "node-1.key", "node-1.pem", "notes.txt"}) {
		t.Errorf("after --force: %q", got)
	}
	if after["ca.pem"] == before["ca.pem"] || after["foreign.pem"] != before["foreign.pem"] || after["notes.txt"] != "keep me" {
		t.Errorf("after --force: the CA kept, or another file changed")
	}
	ca, err := readCert(filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	if c, err := readCert(filepath.Join(dir, "node-1.pem")); err != nil || c.CheckSignatureFrom(ca) != nil {
		t.Errorf("node-1.pem is not signed by the new CA (%v)", err)
	}
	onlyEntry(t, parent, "tls")
}

// TestCertsBadInput: input certs cannot mean is one line, exit 2, and
// writes nothing.
func TestCertsBadInput(t *testing.T) {
	file := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"absurd node count", []string{"--nodes", "100000"}, "--nodes 100000"},
		{"no nodes", []string{"--nodes", "0"}, "--nodes 0: want 1 to 10000"},
		{"out a file", []string{"--out", file}, file + " is a file"},
		{"host with a space", []string{"--hosts", "bad host!"}, `"bad host!"`},
		{"host starting with a hyphen", []string{"--hosts", "ok.example,-x-"}, `"-x-"`},
		{"empty label", []string{"--hosts", "a..b"}, `"a..b"`},
		{"empty host", []string{"--hosts", "a,,b"}, `""`},
		{"label over 63", []string{"--hosts", strings.Repeat("a", 64) + ".example"}, "not an IP address or a DNS name"},
	} {
		dir := filepath.Join(t.TempDir(), "tls")
		args := append([]string{"certs", "--out", dir}, tc.args...)
		var stdout, stderr bytes.Buffer
		code := run(args, &stdout, &stderr)
		if code != exitUsage || strings.Count(stderr.String(), "\n") != 1 || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want %d and one line with %q", tc.name, code, stderr.String(), exitUsage, tc.want)
		}
		if _, err := os.Stat(dir); err == nil {
			t.Errorf("%s: a refused certs created %s", tc.name, dir)
		}
	}
	if got, _ := os.ReadFile(file); string(got) != "x" {
		t.Errorf("certs --out FILE changed the file")
	}
}

func TestCheckHost(t *testing.T) {
	for _, h := range []string{"127.0.0.1", "::1", "fe80::1", "node-1", "node-1.example.com", "*.example.com", "A1.B2"} {
		if err := checkHost(h); err != nil {
			t.Errorf("checkHost(%q) = %v, want nil", h, err)
		}
	}
	for _, h := range []string{"", "bad host!", "-x", "x-", "a..b", "a.", ".a", "*.", "a_b", "http://a", "a:80", "é.example"} {
		if err := checkHost(h); err == nil {
			t.Errorf("checkHost(%q) = nil, want an error", h)
		}
	}
}

// TestCertsFailedWriteLeavesNothing: a write that fails (a full disk,
// played by a file size limit of 0) leaves no part of a new directory,
// and an old one as it was: the CA is replaced whole or not at all.
func TestCertsFailedWriteLeavesNothing(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "tls")
	code, stderr := asMainLimited(t, 0, "certs", "--out", dir, "--nodes", "2")
	if code != exitFailed || strings.Count(stderr, "\n") != 1 || !strings.Contains(stderr, "file too large") {
		t.Errorf("certs on a full disk: exit %d, stderr %q; want %d and one line naming the error", code, stderr, exitFailed)
	}
	onlyEntry(t, parent)

	runCertsOK(t, "--out", dir, "--nodes", "3")
	before := snapshot(t, dir)
	code, stderr = asMainLimited(t, 0, "certs", "--out", dir, "--nodes", "1", "--force")
	if code != exitFailed || strings.Count(stderr, "\n") != 1 {
		t.Errorf("certs --force on a full disk: exit %d, stderr %q; want %d and one line", code, stderr, exitFailed)
	}
	if after := snapshot(t, dir); !maps.Equal(after, before) {
		t.Errorf("a failed certs --force changed %s", dir)
	}
	onlyEntry(t, parent, "tls")
}

// TestCertsRenew: --renew signs the named node certificates anew with the
// CA in --out, in place, leaving the CA and the others as they were; a
// name that is not one, a directory without a CA, or --renew with --nodes
// or --force is refused in one line (exit 2), nothing written. There was
// no way to renew one node's certificate short of a new CA.
func TestCertsRenew(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	runCertsOK(t, "--out", dir, "--nodes", "3")
	before := snapshot(t, dir)
	out := runCertsOK(t, "--out", dir, "--renew", "node-2,node-3")
	if !strings.Contains(out, "signed node-2, node-3 anew in "+dir) {
		t.Errorf("stdout %q", out)
	}
	after := snapshot(t, dir)
	for name, content := range before {
		renewed := strings.HasPrefix(name, "node-2.") || strings.HasPrefix(name, "node-3.")
		if (after[name] != content) != renewed {
			t.Errorf("%s: changed %v, want %v", name, after[name] != content, renewed)
		}
	}
	if _, err := node.LoadTLS(filepath.Join(dir, "ca.pem"), filepath.Join(dir, "node-2.pem"), filepath.Join(dir, "node-2.key")); err != nil {
		t.Errorf("the renewed pair: %v", err)
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"a path", []string{"--out", dir, "--renew", "../x"}, `--renew "../x": not the name of a node certificate`},
		{"the CA", []string{"--out", dir, "--renew", "ca"}, `--renew "ca": not the name`},
		{"no CA", []string{"--out", t.TempDir(), "--renew", "node-1"}, "holds no CA to sign with"},
		{"no --out", []string{"--renew", "node-1"}, "--out DIR (holding the CA) is required"},
		{"with --nodes", []string{"--out", dir, "--renew", "node-1", "--nodes", "2"}, "takes neither --nodes nor --force"},
		{"with --force", []string{"--out", dir, "--renew", "node-1", "--force"}, "takes neither --nodes nor --force"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"certs"}, tc.args...), &stdout, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), tc.want) || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 and one line saying %q", tc.name, code, stderr.String(), tc.want)
		}
	}
	if got := snapshot(t, dir); !maps.Equal(got, after) {
		t.Error("a refused --renew changed the directory")
	}
}

// certsIn reads every certificate of dir/name.
func certsIn(t *testing.T, dir, name string) []*x509.Certificate {
	t.Helper()
	certs, err := node.ReadCerts(filepath.Join(dir, name))
	if err != nil {
		t.Fatal(err)
	}
	return certs
}

// TestCertsRotateCA: the three steps of a CA rotation. --rotate-ca puts
// a new CA in ca.key and first in ca.pem, the old one kept after it, the
// node certificates as they were, and says the steps naming them;
// --renew signs with the new CA; --drop-old-ca leaves it alone in ca.pem,
// refused while a node certificate is still the old CA's. A second
// rotation under way, a drop with nothing to drop, and the steps mixed
// with one another or with --nodes, --force, --hosts are refused in one
// line (exit 2), nothing written. There was no way to change the CA but a
// new one (--force), which every node had to be restarted with.
func TestCertsRotateCA(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	runCertsOK(t, "--out", dir, "--nodes", "2")
	before := snapshot(t, dir)
	old := certsIn(t, dir, "ca.pem")[0]

	out := runCertsOK(t, "--out", dir, "--rotate-ca")
	for _, want := range []string{"1. copy " + filepath.Join(dir, "ca.pem"), "2. mgrpo-node certs --out " + dir + " --renew node-1,node-2", "3. mgrpo-node certs --out " + dir + " --drop-old-ca"} {
		if !strings.Contains(out, want) {
			t.Errorf("--rotate-ca said %q, want %q in it", out, want)
		}
	}
	rotated := snapshot(t, dir)
	for name, content := range before {
		if changed := rotated[name] != content; changed != (name == "ca.pem" || name == "ca.key") {
			t.Errorf("--rotate-ca: %s changed %v", name, changed)
		}
	}
	cas, signer, _, err := node.DirCA(dir)
	if err != nil || len(cas) != 2 || signer != 0 || !cas[1].Equal(old) || cas[0].Equal(old) {
		t.Fatalf("after --rotate-ca: %d CAs, the signer %d, the second the old one %v (%v); want the new one signing, then the old", len(cas), signer, len(cas) == 2 && cas[1].Equal(old), err)
	}
	for _, name := range []string{"node-1", "node-2"} {
		if _, err := node.LoadTLS(filepath.Join(dir, "ca.pem"), filepath.Join(dir, name+".pem"), filepath.Join(dir, name+".key")); err != nil {
			t.Errorf("the bundle with %s of the old CA: %v", name, err)
		}
	}

	refused := func(step string, args []string, want string) {
		t.Helper()
		was := snapshot(t, dir)
		var stdout, stderr bytes.Buffer
		code := run(append([]string{"certs"}, args...), &stdout, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), want) || strings.Count(stderr.String(), "\n") != 1 {
			t.Errorf("%s: exit %d, stderr %q; want exit 2 and one line saying %q", step, code, stderr.String(), want)
		}
		if !maps.Equal(snapshot(t, dir), was) {
			t.Errorf("%s: a refused certs changed %s", step, dir)
		}
	}
	refused("a second rotation", []string{"--out", dir, "--rotate-ca"}, "a rotation is under way; end it with --drop-old-ca")
	refused("a drop before the renewal", []string{"--out", dir, "--drop-old-ca"}, "node-1, node-2 in "+dir+": still signed by the old CA; renew them first (--renew node-1,node-2)")
	runCertsOK(t, "--out", dir, "--renew", "node-1")
	refused("a drop before node-2 is renewed", []string{"--out", dir, "--drop-old-ca"}, "node-2 in "+dir+": still signed by the old CA")
	runCertsOK(t, "--out", dir, "--renew", "node-2")
	for _, name := range []string{"node-1.pem", "node-2.pem"} {
		if c := certsIn(t, dir, name)[0]; c.CheckSignatureFrom(cas[0]) != nil {
			t.Errorf("renewed %s is not signed by the new CA", name)
		}
	}

	out = runCertsOK(t, "--out", dir, "--drop-old-ca")
	if after := certsIn(t, dir, "ca.pem"); len(after) != 1 || !after[0].Equal(cas[0]) || !strings.Contains(out, "dropped "+strconv.Quote(old.Subject.CommonName)) {
		t.Errorf("after --drop-old-ca: %d CAs in ca.pem, it said %q; want the new CA alone", len(after), out)
	}
	refused("a drop with no old CA", []string{"--out", dir, "--drop-old-ca"}, "no rotation to end")
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"rotate and renew", []string{"--rotate-ca", "--renew", "node-1"}, "steps of their own: give one at a time"},
		{"rotate and drop", []string{"--rotate-ca", "--drop-old-ca"}, "steps of their own"},
		{"rotate with --force", []string{"--rotate-ca", "--force"}, "--rotate-ca works on the CA in --out: it takes neither --nodes nor --force"},
		{"drop with --nodes", []string{"--drop-old-ca", "--nodes", "2"}, "--drop-old-ca works on the CA in --out"},
		{"rotate with --hosts", []string{"--rotate-ca", "--hosts", "a.example"}, "--hosts goes with --renew"},
	} {
		refused(tc.name, append([]string{"--out", dir}, tc.args...), tc.want)
	}
	empty := t.TempDir()
	refused("rotate without a CA", []string{"--out", empty, "--rotate-ca"}, "--out "+empty+" holds no CA")
	refused("rotate without --out", []string{"--rotate-ca"}, "--out DIR (holding the CA) is required")
}
