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
	"slices"
	"strconv"
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
	renew := fs.StringSlice("renew", nil, "names of node certificates (node-2,...) to sign anew with the CA in --out (the new one during a rotation), in place; a running node reads its renewed certificate on its next connection")
	rotate := fs.Bool("rotate-ca", false, "start a rotation of the CA in --out: a new CA signs from now on, and ca.pem holds it and the old one (copy it to every node, --renew every node, then --drop-old-ca)")
	drop := fs.Bool("drop-old-ca", false, "end a rotation: ca.pem keeps the new CA alone (refused while a node certificate in --out is the old CA's)")
	if code, ok := parseSubFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	var steps []string // of a rotation, on the CA in --out
	for f, on := range map[string]bool{"--rotate-ca": *rotate, "--renew": len(*renew) > 0, "--drop-old-ca": *drop} {
		if on {
			steps = append(steps, f)
		}
	}
	step := strings.Join(steps, "")
	switch {
	case len(steps) > 1:
		fmt.Fprintln(stderr, "mgrpo-node certs: --rotate-ca, --renew and --drop-old-ca are steps of their own: give one at a time")
		return exitUsage
	case step != "" && (fs.Changed("nodes") || *force):
		fmt.Fprintf(stderr, "mgrpo-node certs: %s works on the CA in --out: it takes neither --nodes nor --force\n", step)
		return exitUsage
	case step != "" && step != "--renew" && fs.Changed("hosts"):
		fmt.Fprintf(stderr, "mgrpo-node certs: %s writes no node certificate: --hosts goes with --renew\n", step)
		return exitUsage
	case step == "--rotate-ca":
		return rotateCA(*out, stdout, stderr)
	case step == "--drop-old-ca":
		return dropOldCA(*out, stdout, stderr)
	case step == "--renew":
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

// rotateCA starts a rotation of the CA in out: a new CA, whose key
// replaces ca.key, and ca.pem the bundle of it and the old CA, out
// written whole or not at all. The old CA's key is gone: every
// certificate signed from now on is the new CA's.
func rotateCA(out string, stdout, stderr io.Writer) int {
	cas, signer, err := caOf(out)
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "mgrpo-node certs: %v\n", err)
		return exitUsage
	case len(cas) > 1:
		fmt.Fprintf(stderr, "mgrpo-node certs: %s holds %d CAs: a rotation is under way; end it with --drop-old-ca before starting another\n",
			filepath.Join(out, "ca.pem"), len(cas))
		return exitUsage
	}
	old := cas[signer]
	var ca *x509.Certificate
	keep := func(name string) bool { return name != "ca.pem" && name != "ca.key" }
	err = atomicfile.ReplaceDir(out, keep, func(tmp string) (err error) {
		ca, err = node.RotateCA(out, tmp)
		return err
	})
	if err != nil {
		fmt.Fprintf(stderr, "mgrpo-node certs: %s\n", errorLine(err))
		return replaceExit(err)
	}
	names := signedBy(out, old)
	if len(names) == 0 {
		names = []string{"NAME,..."}
	}
	fmt.Fprintf(stdout, "a new CA %q signs in %s from now on (ca.key); %s holds it and the old CA %q. To rotate with no node restarted:\n"+
		"  1. copy %s over every node's cluster.tls.ca: each node reads it again and trusts both CAs\n"+
		"  2. mgrpo-node certs --out %s --renew %s, and copy each renewed pair over its node's\n"+
		"  3. mgrpo-node certs --out %s --drop-old-ca, and copy %s over every node's cluster.tls.ca again\n",
		ca.Subject.CommonName, out, filepath.Join(out, "ca.pem"), old.Subject.CommonName,
		filepath.Join(out, "ca.pem"), out, strings.Join(names, ","), out, filepath.Join(out, "ca.pem"))
	return exitOK
}

// dropOldCA ends a rotation of the CA in out: ca.pem keeps the CA of
// ca.key alone. It refuses while a node certificate in out is not that
// CA's: that node would be refused by every node given the new ca.pem.
func dropOldCA(out string, stdout, stderr io.Writer) int {
	cas, signer, err := caOf(out)
	if err != nil {
		fmt.Fprintf(stderr, "mgrpo-node certs: %v\n", err)
		return exitUsage
	}
	if len(cas) == 1 {
		fmt.Fprintf(stderr, "mgrpo-node certs: %s holds one CA, no old one: no rotation to end (--rotate-ca starts one)\n", filepath.Join(out, "ca.pem"))
		return exitUsage
	}
	var stale []string
	for i, ca := range cas {
		if i != signer {
			stale = append(stale, signedBy(out, ca)...)
		}
	}
	if len(stale) > 0 {
		slices.Sort(stale)
		fmt.Fprintf(stderr, "mgrpo-node certs: %s in %s: still signed by the old CA; renew them first (--renew %s), or remove them\n",
			strings.Join(stale, ", "), out, strings.Join(stale, ","))
		return exitUsage
	}
	dropped, err := node.DropOldCAs(out)
	if err != nil {
		fmt.Fprintf(stderr, "mgrpo-node %s\n", errorLine(err))
		return exitFailed
	}
	var names []string
	for _, c := range dropped {
		names = append(names, strconv.Quote(c.Subject.CommonName))
	}
	fmt.Fprintf(stdout, "%s holds the CA %q alone (dropped %s): copy it over every node's cluster.tls.ca; each node reads it again and refuses certificates of the old CA from then on\n",
		filepath.Join(out, "ca.pem"), cas[signer].Subject.CommonName, strings.Join(names, ", "))
	return exitOK
}

// caOf reads the CA in out (node.DirCA), its error one line for the
// operator.
func caOf(out string) ([]*x509.Certificate, int, error) {
	if out == "" {
		return nil, 0, errors.New("--out DIR (holding the CA) is required")
	}
	cas, signer, _, err := node.DirCA(out)
	if err != nil {
		return nil, 0, fmt.Errorf("--out %s holds no CA to rotate: %v; a new cluster's comes from mgrpo-node certs --out DIR", out, errors.Unwrap(err))
	}
	return cas, signer, nil
}

// signedBy names the node certificates in dir (NAME.pem beside NAME.key)
// that ca signed.
func signedBy(dir string, ca *x509.Certificate) []string {
	pems, _ := filepath.Glob(filepath.Join(dir, "*.pem"))
	var names []string
	for _, p := range pems {
		name := strings.TrimSuffix(filepath.Base(p), ".pem")
		if c, err := readCert(p); err == nil && name != "ca" && fileExists(filepath.Join(dir, name+".key")) && c.CheckSignatureFrom(ca) == nil {
			names = append(names, name)
		}
	}
	return names
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
// ca.pem, ca.key, and each NAME.pem the old CA (any CA of a ca.pem
// bundle) signed with its NAME.key. A dir without a CA has none; one with
// a CA is refused unless force, and so is one whose ca.pem cannot be read
// (its certificates could not be told apart).
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
	cas, err := node.ReadCerts(caPath)
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
		if c, err := readCert(p); err == nil && p != caPath && signedByOne(c, cas) {
			stale[filepath.Base(p)] = true
			if key := strings.TrimSuffix(p, ".pem") + ".key"; fileExists(key) {
				stale[filepath.Base(key)] = true
			}
		}
	}
	return stale, nil
}

// signedByOne reports whether one of cas signed c.
func signedByOne(c *x509.Certificate, cas []*x509.Certificate) bool {
	return slices.ContainsFunc(cas, func(ca *x509.Certificate) bool { return c.CheckSignatureFrom(ca) == nil })
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
