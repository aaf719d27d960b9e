package main

import (
	"fmt"
	"io"

	"github.com/spf13/pflag"

	"github.com/mgrpo/mgrpo/actors/node"
)

// runCerts runs `mgrpo-node certs --out DIR --nodes N [--hosts a,b]`: a new
// cluster CA and N node certificates signed by it, for the mutual TLS
// between nodes (cluster.tls.ca, .cert, .key).
func runCerts(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("mgrpo-node certs", pflag.ContinueOnError)
	out := fs.String("out", "", "directory to write ca.pem, ca.key and node-N.pem, node-N.key into (required)")
	nodes := fs.Int("nodes", 3, "node certificates to write")
	hosts := fs.StringSlice("hosts", nil, "optional names or addresses to put in every node certificate")
	if code, ok := parseSubFlags(fs, args, stdout, stderr); !ok {
		return code
	}
	if *out == "" || *nodes < 1 {
		fmt.Fprintln(stderr, "mgrpo-node certs: --out DIR and --nodes N (at least 1) are required")
		return exitUsage
	}
	if err := node.WriteCerts(*out, *nodes, *hosts); err != nil {
		fmt.Fprintf(stderr, "mgrpo-node certs: %v\n", err)
		return exitFailed
	}
	fmt.Fprintf(stdout, "wrote %s/ca.pem and %d node certificates (node-1.pem .. node-%d.pem, keys beside them); give each node\n"+
		"  --cluster.tls.ca %s/ca.pem --cluster.tls.cert %s/node-I.pem --cluster.tls.key %s/node-I.key\n"+
		"and keep ca.key away from the nodes (it signs new ones)\n", *out, *nodes, *nodes, *out, *out, *out)
	return exitOK
}
