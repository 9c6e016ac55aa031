package cli

import (
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab"
	"github.com/locklab/locklab/internal/tooling/redistest"
)

// hostileURL is an --addr value and the password in it, as the server
// should receive it (empty for a URL without one).
type hostileURL struct {
	name, addr, password string
}

// hostileURLs are --addr values whose passwords hold the characters that
// end a URL's parts (/ # ? @ :), percent-encoded or not, on s (a live
// server whose ACL user alice has the password good), on a port where
// nothing listens (down) and with a bad port.
// s is a live server, down a port where nothing listens, and tls a server's
// TLS port, whose certificate the client does not trust: refused at once,
// where a plain server leaves a TLS client waiting out the addrs backend's
// tries.
func hostileURLs(s, down, tls string) []hostileURL {
	const good = "Qv7/Zx#K?w@9:Lm"
	enc := url.QueryEscape("Pz%4Fq/Yt#Uj")
	return []hostileURL{
		{"slash", "redis://:Se7/cRq@" + s, "Se7/cRq"},
		{"issue", "redis://:p@ss:w/rd#1@" + s, "p@ss:w/rd#1"},
		{"every delimiter, user", "redis://bob:" + good + "@" + s + "/2", good},
		{"every delimiter, no user", "redis://:" + good + "@" + s, good},
		{"redis-cli form", "redis://Wq8Xv3Tz#r?Y@" + s, "Wq8Xv3Tz#r?Y"},
		{"right password", "redis://alice:" + good + "@" + s + "/3", good},
		{"percent-encoded", "redis://alice:" + enc + "@" + s, "Pz%4Fq/Yt#Uj"},
		{"bad percent-encoding", "redis://alice:Kd9%zzRw/Tq@" + s, "Kd9%zzRw/Tq"},
		{"user without password", "redis://carol:@" + s, ""},
		{"rediss", "rediss://alice:" + good + "@" + tls, good},
		{"nothing listens", "redis://:Hj7/k#dNq@" + down, "Hj7/k#dNq"},
		{"bad port", "redis://:Hj7/k#dNq@127.0.0.1:port", "Hj7/k#dNq"},
		{"bad host", "redis://:Hj7/k#dNq@[::1", "Hj7/k#dNq"},
		{"no scheme", "Mf3/u#Ty@Vb@127.0.0.1:x", "Mf3/u#Ty@Vb"},
		{"no scheme, live", "Mf3/u#Ty@Vb@" + s, "Mf3/u#Ty@Vb"},
		{"unknown option", "redis://:Rk4/e?Gq@" + s + "/0?color=red", "Rk4/e?Gq"},
		{"http", "http://:Rk4/e?Gq@" + s, "Rk4/e?Gq"},
	}
}

// secretParts are the strings whose appearance in a message leaks
// password: every substring of 4 characters or more of it, as given and
// percent-encoded (as a query and as a path).
func secretParts(password string) []string {
	var out []string
	for _, form := range []string{password, url.QueryEscape(password), url.PathEscape(password)} {
		for i := range form {
			for j := i + 4; j <= len(form); j++ {
				out = append(out, form[i:j])
			}
		}
	}
	return out
}

// assertNoSecret fails when text shows any part of h's password, or h's
// address as given.
func assertNoSecret(t *testing.T, h hostileURL, where, text string) {
	t.Helper()
	if h.password != "" {
		assert.NotContains(t, text, h.addr, "%s shows the address as given", where)
		for _, p := range secretParts(h.password) {
			if !assert.NotContains(t, text, p, "%s shows %q of the password %q", where, p, h.password) {
				return
			}
		}
	}
}

// TestParseURLHidesPassword: no error of ParseAddr (ParseURL behind it)
// and no redaction shows any part of the password, whatever characters it
// holds; the passwords are read whole.
func TestParseURLHidesPassword(t *testing.T) {
	for _, h := range hostileURLs("127.0.0.1:6379", "127.0.0.1:1", "127.0.0.1:2") {
		t.Run(h.name, func(t *testing.T) {
			assertNoSecret(t, h, "RedactURL", redact(h.addr))
			o, err := locklab.ParseURL(h.addr)
			if err != nil {
				assertNoSecret(t, h, "ParseURL's error", err.Error())
				return
			}
			if h.name != "bad percent-encoding" && h.password != "" && !strings.HasPrefix(h.addr, "Mf3") {
				assert.Equal(t, h.password, o.Password, "the password is read whole")
			}
			assertNoSecret(t, h, "Redacted", o.Redacted())
		})
	}
}

// TestAddrNeverShowsPassword runs every command that takes --addr on each
// hostile URL, against a live server, a port where nothing listens and
// addresses that do not parse, and checks that no part of the password
// reaches stdout or stderr, whether the command fails or runs (the right
// password of an ACL user).
func TestAddrNeverShowsPassword(t *testing.T) {
	t.Parallel()
	s := redistest.StartOne(t)
	s.ACLUser(t, "alice", "Qv7/Zx#K?w@9:Lm")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	down := ln.Addr().String()
	ln.Close()
	tls := redistest.StartTLS(t)
	dir := t.TempDir()
	commands := [][]string{
		{"check"},
		{"race-demo"},
		{"demo", "stale-recovery", "-s", "setnx-del"},
		{"explore", "-s", "setnx-del", "-x", "stale-recovery", "--max-schedules", "5"},
		{"stress", "-s", "set-nx-px", "--duration", "200ms", "--clients", "2"},
		{"bench", "-s", "set-nx-px", "--cycles", "5", "--rounds", "1"},
		{"bench", "--stores", "redis", "--cycles", "5", "--rounds", "1", "--contend-time", "50ms"},
		{"matrix", "-s", "setnx-del", "-x", "stale-recovery", "--max-schedules", "5"},
		{"report", "-s", "setnx-del", "-x", "stale-recovery", "--max-schedules", "5", "-o", filepath.Join(dir, "r.html")},
		{"play", "clock-skew"},
	}
	for _, h := range hostileURLs(s.Addr, down, tls.TLSAddr) {
		for _, c := range commands {
			args := append(append([]string(nil), c...), "--addr", h.addr)
			t.Run(fmt.Sprintf("%s/%s", h.name, strings.Join(c[:1], " ")), func(t *testing.T) {
				code, out, stderr := runStatus(t, args...)
				assertNoSecret(t, h, "stdout", out)
				assertNoSecret(t, h, "stderr", stderr)
				if h.name == "right password" && c[0] == "check" {
					assert.Equal(t, 0, code, stderr)
					assert.Contains(t, out, "redis://alice:xxxxx@"+s.Addr+"/3")
				}
			})
		}
	}
}
