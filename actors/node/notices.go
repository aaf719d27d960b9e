package node

import (
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/mgrpo/mgrpo/internal/connlimit"
)

// noticeEvery is how long a notice of one kind about one peer is not
// repeated: a peer that keeps trying (a worker dialling every 2 s, a
// hostile client in a loop) costs one line a minute, not a flood.
const noticeEvery = time.Minute

// maxNoticeKeys bounds the notices remembered; past it, those older than
// noticeEvery are forgotten.
const maxNoticeKeys = 1024

// notices writes the node's own one-line notices about its peers: a
// refused connection or node, a recovered panic. Each is said at most
// once per noticeEvery for one peer host and one kind of event. Safe for
// concurrent use.
type notices struct {
	out io.Writer
	now func() time.Time

	mu   sync.Mutex
	last map[string]time.Time // peer host and kind → when it was last said
}

func newNotices(out io.Writer) *notices {
	if out == nil {
		out = io.Discard
	}
	return &notices{out: out, now: time.Now, last: map[string]time.Time{}}
}

// say writes the line unless a notice of this kind about peer's host was
// written in the last noticeEvery; it reports whether it wrote.
func (n *notices) say(peer, kind, format string, args ...any) bool {
	key := peerHost(peer) + "\x00" + kind
	now := n.now()
	n.mu.Lock()
	if t, ok := n.last[key]; ok && now.Sub(t) < noticeEvery {
		n.mu.Unlock()
		return false
	}
	if len(n.last) >= maxNoticeKeys {
		for k, t := range n.last {
			if now.Sub(t) >= noticeEvery {
				delete(n.last, k)
			}
		}
	}
	n.last[key] = now
	n.mu.Unlock()
	fmt.Fprintln(n.out, oneLine(fmt.Sprintf(format, args...)))
	return true
}

// maxNoticeLine bounds a notice: it may quote what a peer sent.
const maxNoticeLine = 1 << 10

// oneLine makes s one printable line of at most maxNoticeLine bytes
// (whole runes), marked "…" when cut.
func oneLine(s string) string {
	s = strings.ToValidUTF8(s, "?")
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	if len(s) <= maxNoticeLine {
		return s
	}
	cut := maxNoticeLine
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// peerHost is the host of a host:port address (the address itself when it
// has no port): a peer's port changes with every connection.
func peerHost(addr string) string {
	if h, _, err := net.SplitHostPort(addr); err == nil {
		return h
	}
	return addr
}

// refusedConn returns what a port of the node (port names it: membership,
// actor, weight) calls when it refuses a connection for a limit (one line per
// peer host a minute, one a minute for the port's total) or cannot accept
// one (peer "": one line a minute).
func (n *notices) refusedConn(port string) func(peer string, err error) {
	return func(peer string, err error) {
		switch {
		case peer == "":
			n.say("", port+" accept", "cannot accept connections on the %s port: %v; trying again", port, err)
		case errors.Is(err, connlimit.ErrTotal):
			n.say("", port+" conns", "refused a connection from %s to the %s port: %v", peer, port, err)
		default:
			n.say(peer, port+" conns", "refused a connection from %s to the %s port: %v", peer, port, err)
		}
	}
}
