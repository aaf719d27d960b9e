package main

import (
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/mgrpo/mgrpo/actors/node"
	"github.com/mgrpo/mgrpo/internal/atomicfile"
)

// maxCertNodes is the most node certificates one `certs` writes: a
// cluster is tens of nodes; 100000 was a typo that wrote 200002 files.
const maxCertNodes = 10000

// runCerts runs `mgrpo-node certs --out DIR --nodes N [--hosts a,b]`: a new
// cluster CA and N node certificates signed by it, for the mutual TLS
// between nodes (cluster.tls.ca, .cert, .key). DIR is written whole or not
// at all (atomicfile.ReplaceDir). A DIR that holds a CA is refused without
// --force: a new CA invalidates every certificate the old one signed.
// With --force those go too (staleCertFiles); other files in DIR stay.
func runCerts(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("mgrpo-node certs", pflag.ContinueOnError)
	out := fs.String("out", "", "directory to write ca.pem, ca.key and node-N.pem, node-N.key into (required)")
	nodes := fs.Int("nodes", 3, fmt.Sprintf("node certificates to write (1 to %d)", maxCertNodes))
	hosts := fs.StringSlice("hosts", nil, "optional names or addresses to put in every node certificate (IP addresses or DNS names)")
	force := fs.Bool("force", false, "replace the CA in --out, and remove the certificates it signed")
	renew := fs.StringSlice("renew", nil, "names of node certificates (node-2,...) to sign anew with the CA in --out, in place; a running node reads its renewed certificate on its next connection")
	if code, ok := parseSubFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if len(*renew) > 0 {
		if fs.Changed("nodes") || *force {
			fmt.Fprintln(stderr, "mgrpo-node certs: --renew signs with the CA in --out: it takes neither --nodes nor --force")
			return exitUsage
		}
		return renewCerts(*out, *renew, *hosts, stdout, stderr)
	}
	stale, err := checkCertsArgs(*out, *nodes, *hosts, *force)
	if err != nil {
		fmt.Fprintf(stderr, "mgrpo-node certs: %v\n", err)
		return exitUsage
	}
	keep := func(name string) bool { return !stale[name] }
	err = atomicfile.ReplaceDir(*out, keep, func(tmp string) error { return node.WriteCerts(tmp, *nodes, *hosts) })
	if err != nil {
		fmt.Fprintf(stderr, "mgrpo-node certs: %s\n", errorLine(err))
		return replaceExit(err)
	}
	if len(stale) > 0 {
		signed := 0
		for name := range stale {
			if strings.HasSuffix(name, ".pem") && name != "ca.pem" {
				signed++
			}
		}
		fmt.Fprintf(stdout, "the old CA of %s and the %d certificate%s it signed are gone: every node needs its new certificate\n",
			*out, signed, map[bool]string{true: "s"}[signed != 1])
	}
	fmt.Fprintf(stdout, "wrote %s/ca.pem and %d node certificates (node-1.pem .. node-%d.pem, keys beside them); give each node\n"+
		"  --cluster.tls.ca %s/ca.pem --cluster.tls.cert %s/node-I.pem --cluster.tls.key %s/node-I.key\n"+
		"and keep ca.key away from the nodes (it signs new ones)\n", *out, *nodes, *nodes, *out, *out, *out)
	return exitOK
}

// renewCerts signs the node certificates names anew with the CA in out
// (ca.pem, ca.key), each for node.CertValidity, in place of the old ones.
func renewCerts(out string, names, hosts []string, stdout, stderr io.Writer) int {
	fail := func(format string, args ...any) int {
		fmt.Fprintf(stderr, "mgrpo-node certs: "+format+"\n", args...)
		return exitUsage
	}
	if out == "" {
		return fail("--out DIR (holding the CA) is required")
	}
	for _, h := range hosts {
		if err := checkHost(h); err != nil {
			return fail("%v", err)
		}
	}
	for _, name := range names {
		if name == "ca" || !validLabel(strings.ReplaceAll(name, "_", "-")) {
			return fail("--renew %q: not the name of a node certificate (node-2, say: NAME.pem and NAME.key in --out)", name)
		}
	}
	for _, f := range []string{"ca.pem", "ca.key"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			return fail("--out %s holds no CA to sign with (%s: %v); a new cluster's comes from mgrpo-node certs --out DIR", out, f, errors.Unwrap(err))
		}
	}
	until := time.Now().Add(node.CertValidity)
	for _, name := range names {
		if err := node.AddNodeCert(out, name, hosts, time.Now().Add(-time.Hour), until); err != nil {
			fmt.Fprintf(stderr, "mgrpo-node %s\n", errorLine(err))
			return exitFailed
		}
	}
	fmt.Fprintf(stdout, "signed %s anew in %s, valid until %s: a running node presents its new certificate from its next connection on, no restart needed\n",
		strings.Join(names, ", "), out, until.UTC().Format(time.RFC3339))
	return exitOK
}

// checkCertsArgs refuses flags certs cannot carry out and returns the
// files of out that the new CA makes stale (staleCertFiles; none when out
// holds no CA).
func checkCertsArgs(out string, nodes int, hosts []string, force bool) (map[string]bool, error) {
	if out == "" {
		return nil, errors.New("--out DIR is required")
	}
	if nodes < 1 || nodes > maxCertNodes {
		return nil, fmt.Errorf("--nodes %d: want 1 to %d", nodes, maxCertNodes)
	}
	for _, h := range hosts {
		if err := checkHost(h); err != nil {
			return nil, err
		}
	}
	st, err := os.Stat(out)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("--out %s: %w", out, err)
	case !st.IsDir():
		return nil, fmt.Errorf("--out %s is a file, not a directory", out)
	}
	return staleCertFiles(out, force)
}

// checkHost refuses a --hosts value that is neither an IP address nor a
// DNS name (labels of letters, digits and inner hyphens; a leading "*."
// for a wildcard).
func checkHost(h string) error {
	if net.ParseIP(h) != nil {
		return nil
	}
	name := strings.TrimPrefix(h, "*.")
	ok := len(h) <= 253 && name != ""
	for _, label := range strings.Split(name, ".") {
		ok = ok && validLabel(label)
	}
	if !ok {
		return fmt.Errorf("--hosts %q: not an IP address or a DNS name", h)
	}
	return nil
}

// validLabel reports whether s is one DNS label: 1 to 63 letters, digits
// and hyphens, not starting or ending with a hyphen.
func validLabel(s string) bool {
	if len(s) < 1 || len(s) > 63 || s[0] == '-' || s[len(s)-1] == '-' {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// staleCertFiles returns the files of dir that a new CA makes stale:
// ca.pem, ca.key, and each NAME.pem the old CA signed with its NAME.key.
// A dir without a CA has none; one with a CA is refused unless force, and
// so is one whose ca.pem cannot be read (its certificates could not be
// told apart).
func staleCertFiles(dir string, force bool) (map[string]bool, error) {
	caPath := filepath.Join(dir, "ca.pem")
	_, errPem := os.Stat(caPath)
	_, errKey := os.Stat(filepath.Join(dir, "ca.key"))
	if errPem != nil && errKey != nil {
		return nil, nil
	}
	if !force {
		return nil, fmt.Errorf("--out %s already holds a CA (%s): a new one would invalidate every node certificate it signed; add --force to replace it and them", dir, caPath)
	}
	ca, err := readCert(caPath)
	if err != nil {
		return nil, fmt.Errorf("--out %s: %v: cannot tell which certificates it signed; move the directory aside", dir, err)
	}
	stale := map[string]bool{"ca.pem": true}
	if errKey == nil {
		stale["ca.key"] = true
	}
	pems, err := filepath.Glob(filepath.Join(dir, "*.pem"))
	if err != nil {
		return nil, err
	}
	for _, p := range pems {
		if c, err := readCert(p); err == nil && p != caPath && c.CheckSignatureFrom(ca) == nil {
			stale[filepath.Base(p)] = true
			if key := strings.TrimSuffix(p, ".pem") + ".key"; fileExists(key) {
				stale[filepath.Base(key)] = true
			}
		}
	}
	return stale, nil
}

func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// readCert reads the first certificate of a PEM file.
func readCert(path string) (*x509.Certificate, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	block, _ := pem.Decode(b)
	if block == nil || block.Type != "CERTIFICATE" {
		return nil, fmt.Errorf("%s is not a PEM certificate", path)
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}
