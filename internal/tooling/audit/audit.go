// Package audit is what the stores' audits of their servers share (a
// store's harness.Driver.Audit): reading the key=value fields of a
// server's own listing of its connections, and saying, in one style, what
// a server counted that the harness did not open.
package audit

import (
	"errors"
	"fmt"
	"strings"
)

// Fields reads the key=value fields of s, separated by sep ("" for runs
// of white space), as a Redis CLIENT LIST line, a ZooKeeper cons line's
// parenthesis or a Redis commandstats value gives them. A field without
// "=" is left out; a key given twice keeps its last value.
func Fields(s, sep string) map[string]string {
	f := map[string]string{}
	var kvs func(func(string) bool)
	if sep == "" {
		kvs = strings.FieldsSeq(s)
	} else {
		kvs = strings.SplitSeq(s, sep)
	}
	for kv := range kvs {
		if k, v, ok := strings.Cut(kv, "="); ok {
			f[k] = v
		}
	}
	return f
}

// Server is one server an audit reads: its name in the run ("n1", "n1
// zk2") and its address.
type Server struct {
	Name, Addr string
}

// String is the server as every line of the audit names it: "n1
// (127.0.0.1:6379)".
func (s Server) String() string { return fmt.Sprintf("%s (%s)", s.Name, s.Addr) }

// Unread is the error of a server the audit could not read: what it
// asked (none: it could not connect) and why.
func (s Server) Unread(what string, err error) error {
	if what == "" {
		return fmt.Errorf("%s: %w", s, err)
	}
	return fmt.Errorf("%s: %s: %w", s, what, err)
}

// Found is the error of a server that counted clients the harness did not
// open, each thing it said one clause ("has 2 client backend(s) the
// harness did not open: ..."); none is no error. The error is ErrHidden.
func (s Server) Found(said ...string) error {
	if len(said) == 0 {
		return nil
	}
	return found(fmt.Sprintf("%s %s", s, strings.Join(said, ", and ")))
}

// NotOpened is the clause of n things the harness did not open (noun in
// the singular), each of found after it where there are any: "holds 1
// session(s) the harness did not open: 127.0.0.1:35034 sid=0x1 lop=EXIS".
func NotOpened(verb string, n int, noun string, found []string) string {
	s := fmt.Sprintf("%s %d %s(s) the harness did not open", verb, n, noun)
	if len(found) > 0 {
		s += ": " + strings.Join(found, "; ")
	}
	return s
}

// Open is the clause of connections still open that are not the
// harness's, after a clause that said whose they are not: "holds 3 open:
// a; b; c".
func Open(found []string) string {
	return fmt.Sprintf("holds %d open: %s", len(found), strings.Join(found, "; "))
}

// ErrHidden is what every error of Found is: a server counted clients
// that the harness did not open.
var ErrHidden = errors.New("clients the harness did not open")

// found is an error of Found.
type found string

func (f found) Error() string        { return string(f) }
func (f found) Is(target error) bool { return target == ErrHidden }

// Split parts a check's error (a store's Driver.Audit check: errors.Join
// of each server's) into what the servers counted, a line of Found's
// each, and the errors of the servers it could not read.
func Split(err error) (hidden []string, unread []error) {
	if err == nil {
		return nil, nil
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			h, u := Split(e)
			hidden, unread = append(hidden, h...), append(unread, u...)
		}
		return hidden, unread
	}
	if f, ok := err.(found); ok {
		return []string{string(f)}, nil
	}
	return nil, []error{err}
}
