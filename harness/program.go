// Client programs: what each client of a scenario does, in order
// (acquire, write, sleep, release, crash), and their text form.

package harness

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// OpKind is what a client program does next.
type OpKind string

// The operations of a client program.
const (
	// OpAcquire makes up to Attempts calls of Locker.Acquire, stopping at
	// the first success. A client that already holds the lock skips it.
	OpAcquire OpKind = "acquire"
	// OpWrite writes to the protected resource with the lease's fence
	// number: one scheduling step. Skipped when the client holds nothing.
	OpWrite OpKind = "write"
	// OpRelease calls Locker.Release. Skipped when the client holds nothing.
	OpRelease OpKind = "release"
	// OpCrash stops the client for good, holding whatever it held.
	OpCrash OpKind = "crash"
	// OpSleep is one scheduling step in which the client waits for Dur:
	// every clock advances and TTLs shrink by Dur.
	OpSleep OpKind = "sleep"
)

// Op is one operation of a client program.
type Op struct {
	Kind     OpKind
	Attempts int
	Dur      time.Duration
}

// String prints the op in the program text form.
func (o Op) String() string {
	switch o.Kind {
	case OpAcquire:
		if o.Attempts > 1 {
			return fmt.Sprintf("acquire*%d", o.Attempts)
		}
		return "acquire"
	case OpSleep:
		return "sleep(" + o.Dur.String() + ")"
	}
	return string(o.Kind)
}

// Program is what one client does, in order.
type Program []Op

// String prints p in the text form, e.g. "acquire*3 write release".
func (p Program) String() string {
	parts := make([]string, len(p))
	for i, o := range p {
		parts[i] = o.String()
	}
	return strings.Join(parts, " ")
}

// MarshalText writes p in the text form, as JSON shows it.
func (p Program) MarshalText() ([]byte, error) { return []byte(p.String()), nil }

// UnmarshalText reads p from the text form.
func (p *Program) UnmarshalText(b []byte) error {
	q, err := ParseProgram(string(b))
	if err != nil {
		return err
	}
	*p = q
	return nil
}

// ParseProgram reads a client's program in the text form the catalog's
// scenarios are written in: ops separated by white space, each acquire,
// acquire*k (k attempts), write, release, crash or sleep(d) (a Go
// duration), e.g. "acquire*3 write sleep(32s) release".
func ParseProgram(text string) (Program, error) {
	var p Program
	for _, tok := range strings.Fields(text) {
		switch {
		case tok == "acquire":
			p = append(p, Op{Kind: OpAcquire, Attempts: 1})
		case strings.HasPrefix(tok, "acquire*"):
			k, err := strconv.Atoi(tok[len("acquire*"):])
			if err != nil || k < 1 {
				return nil, fmt.Errorf("op %q: want acquire*<attempts>", tok)
			}
			p = append(p, Op{Kind: OpAcquire, Attempts: k})
		case tok == "write" || tok == "release" || tok == "crash":
			p = append(p, Op{Kind: OpKind(tok)})
		case strings.HasPrefix(tok, "sleep(") && strings.HasSuffix(tok, ")"):
			d, err := time.ParseDuration(tok[6 : len(tok)-1])
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("op %q: bad duration", tok)
			}
			p = append(p, Op{Kind: OpSleep, Dur: d})
		default:
			return nil, fmt.Errorf("unknown op %q (want acquire, acquire*k, write, release, crash, sleep(d))", tok)
		}
	}
	return p, nil
}

// mustParseProgram is ParseProgram that panics on error, for literals.
func mustParseProgram(text string) Program {
	p, err := ParseProgram(text)
	if err != nil {
		panic(err)
	}
	return p
}

// MustPrograms is ParseProgram for each text, in order, for a
// Scenario's Programs written as literals; it panics on a bad program, as
// regexp.MustCompile does.
func MustPrograms(texts ...string) []Program { return progs(texts...) }
