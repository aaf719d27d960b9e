package actors

import (
	"strings"
	"testing"
)

// TestProfilesWarning: a node serving Go's profiles on a host other
// nodes can reach says they are plain HTTP, outside the cluster's TLS; on
// a loopback host it says nothing.
func TestProfilesWarning(t *testing.T) {
	for _, tc := range []struct {
		host string
		warn bool
	}{
		{"127.0.0.1", false}, {"localhost", false}, {"::1", false},
		{"0.0.0.0", true}, {"10.0.0.5", true}, {"node-1.example", true},
	} {
		got := profilesWarning(tc.host)
		if (got != "") != tc.warn || tc.warn && !strings.Contains(got, "plain HTTP, outside the cluster's TLS, to whoever reaches "+tc.host) {
			t.Errorf("profilesWarning(%q) = %q; want a warning: %v", tc.host, got, tc.warn)
		}
	}
}
