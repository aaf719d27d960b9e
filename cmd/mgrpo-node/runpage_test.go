package main

import (
	"bytes"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestServeAddressRefused: an output.serve address that cannot be bound
// (taken, or not this machine's) is one line naming output.serve, exit 2,
// before the first step, and the new run directory is gone (it was exit
// 1, "mgrpo-node: output.serve …").
func TestServeAddressRefused(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	for _, tc := range []struct{ name, addr, want string }{
		{"port in use", taken.Addr().String(), "address already in use"},
		{"not this machine", "192.0.2.1:0", "cannot assign requested address"},
	} {
		out := t.TempDir()
		var stdout, stderr bytes.Buffer
		code := runEnv(quickRun(out, "r", "2", "--output.serve", tc.addr), nil, &stdout, &stderr)
		if code != exitUsage || !strings.Contains(stderr.String(), tc.want) {
			t.Errorf("%s: exit %d, stderr %q; want %d naming %q", tc.name, code, stderr.String(), exitUsage, tc.want)
		}
		assertOneLine(t, stderr.String(), "output.serve = "+tc.addr)
		if strings.Contains(stdout.String(), "warm start") || strings.Contains(stdout.String(), "step 1") {
			t.Errorf("%s: it trained before refusing the address: %q", tc.name, stdout.String())
		}
		if _, err := os.Stat(filepath.Join(out, "r")); err == nil {
			t.Errorf("%s: the run directory stayed", tc.name)
		}
	}
}
