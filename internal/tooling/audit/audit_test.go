package audit

import (
	"errors"
	"reflect"
	"testing"
)

func TestFields(t *testing.T) {
	for _, c := range []struct {
		s, sep string
		want   map[string]string
	}{
		// a Redis CLIENT LIST line
		{"id=3 addr=127.0.0.1:52614 name= cmd=del\n", "", map[string]string{"id": "3", "addr": "127.0.0.1:52614", "name": "", "cmd": "del"}},
		// a ZooKeeper cons line's parenthesis
		{"queued=0,sid=0x1000a2b3c4d0000,lop=EXIS", ",", map[string]string{"queued": "0", "sid": "0x1000a2b3c4d0000", "lop": "EXIS"}},
		// a Redis commandstats value; a field without "=" is left out
		{"calls=12,usec=30,odd", ",", map[string]string{"calls": "12", "usec": "30"}},
		{"", ",", map[string]string{}},
	} {
		if got := Fields(c.s, c.sep); !reflect.DeepEqual(got, c.want) {
			t.Errorf("Fields(%q, %q) = %v, want %v", c.s, c.sep, got, c.want)
		}
	}
}

func TestServerSays(t *testing.T) {
	s := Server{Name: "n3", Addr: "127.0.0.1:44329"}
	if err := s.Found(); err != nil {
		t.Errorf("Found() = %v, want nil", err)
	}
	got := s.Found(NotOpened("accepted", 3, "connection", nil), Open([]string{"a", "b"})).Error()
	if want := "n3 (127.0.0.1:44329) accepted 3 connection(s) the harness did not open, and holds 2 open: a; b"; got != want {
		t.Errorf("Found = %q, want %q", got, want)
	}
	got = s.Found(NotOpened("has", 1, "client backend", []string{"pid 7"})).Error()
	if want := "n3 (127.0.0.1:44329) has 1 client backend(s) the harness did not open: pid 7"; got != want {
		t.Errorf("Found = %q, want %q", got, want)
	}
	cause := errors.New("refused")
	err := s.Unread("INFO", cause)
	if err.Error() != "n3 (127.0.0.1:44329): INFO: refused" || !errors.Is(err, cause) {
		t.Errorf("Unread = %v", err)
	}
	if err := s.Unread("", cause); err.Error() != "n3 (127.0.0.1:44329): refused" {
		t.Errorf("Unread = %v", err)
	}
}

func TestSplit(t *testing.T) {
	a, b := Server{"n1", "a:1"}, Server{"n2", "b:2"}
	unread := a.Unread("INFO", errors.New("refused"))
	err := errors.Join(unread, b.Found(NotOpened("holds", 1, "session", []string{"s"})))
	if !errors.Is(err, ErrHidden) || errors.Is(unread, ErrHidden) {
		t.Errorf("errors.Is(_, ErrHidden) wrong: %v", err)
	}
	hidden, u := Split(err)
	if want := []string{"n2 (b:2) holds 1 session(s) the harness did not open: s"}; !reflect.DeepEqual(hidden, want) {
		t.Errorf("hidden = %q, want %q", hidden, want)
	}
	if len(u) != 1 || u[0] != unread {
		t.Errorf("unread = %v, want [%v]", u, unread)
	}
	if h, u := Split(nil); h != nil || u != nil {
		t.Errorf("Split(nil) = %v, %v", h, u)
	}
}
