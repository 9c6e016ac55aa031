// Checking the command line: flag values that refuse what is out of their
// range as the command line is parsed, before anything runs, and the
// one-line messages that name a flag as the user typed it.
//
// The rules, the same for every command:
//   - a count is a whole number with a lower bound (1 where 0 would mean
//     nothing, 0 where zero means zero: --preemptions 0 is no preemption,
//     --faults 0 no fault, --cycles 0 no limit) and sometimes an upper one
//     (--workers: at most 16, a worker per database);
//   - a duration is at least 1ms (--ttl, the resolution of a lease), more
//     than 0 (--duration, --fault-every, --fault-for, --idle) or 0 and more
//     where zero means none (--skew);
//   - a probability is from 0 to 1, and 0 turns its fault off (-1, which
//     turned it off before, still does);
//   - a name (strategy, scenario, level, node fault) must be one the
//     command knows, and the message lists those it does.
//
// A bad value is an error of one line, "--flag value: what is wanted",
// exit status 2.

package cli

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// noMax is an intRange without an upper bound.
const noMax = math.MaxInt64

// intRange is what an integer flag accepts: from min to max, and what 0
// means where it is in the range.
type intRange struct {
	min, max int64
	zero     string
}

func atLeast(min int64) intRange { return intRange{min: min, max: noMax} }

// orZero is r with 0 accepted, meaning what.
func (r intRange) orZero(what string) intRange { r.min, r.zero = 0, what; return r }

func (r intRange) String() string {
	s := fmt.Sprintf("must be a whole number from %d to %d", r.min, r.max)
	if r.max == noMax {
		s = fmt.Sprintf("must be a whole number, %d or more", r.min)
	}
	if r.zero != "" {
		s += " (0: " + r.zero + ")"
	}
	return s
}

// intValue is an int or int64 flag that refuses values out of its range.
type intValue[T int | int64] struct {
	p *T
	r intRange
}

func (v *intValue[T]) Set(s string) error {
	n, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
	if err != nil || n < v.r.min || n > v.r.max {
		return errors.New(v.r.String())
	}
	*v.p = T(n)
	return nil
}

func (v *intValue[T]) String() string { return strconv.FormatInt(int64(*v.p), 10) }
func (v *intValue[T]) Type() string   { return "int" }

// intFlag defines an integer flag that accepts only r; the usage gets
// what 0 means appended when r says.
func intFlag[T int | int64](f *pflag.FlagSet, p *T, name, short string, def T, r intRange, usage string) {
	*p = def
	if r.zero != "" {
		usage += " (0: " + r.zero + ")"
	}
	f.VarP(&intValue[T]{p: p, r: r}, name, short, usage)
}

// durRange is what a duration flag accepts: at least min, or more than 0
// when min is 0 and positive is set; zero says what 0 means where 0 is
// accepted.
type durRange struct {
	min      time.Duration
	positive bool
	zero     string
}

func (r durRange) String() string {
	var s string
	switch {
	case r.positive:
		s = "must be a duration more than 0"
	case r.min == 0:
		s = "must be a duration, 0 or more"
	default:
		s = "must be a duration of at least " + r.min.String()
	}
	if r.zero != "" {
		s += " (0: " + r.zero + ")"
	}
	return s + ", such as 100ms, 2s or 1m"
}

type durValue struct {
	p *time.Duration
	r durRange
}

func (v *durValue) Set(s string) error {
	d, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil || d < v.r.min || v.r.positive && d <= 0 {
		return errors.New(v.r.String())
	}
	*v.p = d
	return nil
}

func (v *durValue) String() string {
	if *v.p == 0 {
		return "0"
	}
	return v.p.String()
}
func (v *durValue) Type() string { return "duration" }

func durFlag(f *pflag.FlagSet, p *time.Duration, name string, def time.Duration, r durRange, usage string) {
	*p = def
	if r.zero != "" {
		usage += " (0: " + r.zero + ")"
	}
	f.Var(&durValue{p: p, r: r}, name, usage)
}

// probValue is a probability flag: from 0 to 1, 0 turning its fault off;
// -1, which turned it off before 0 did, still does.
type probValue struct {
	p    *float64
	zero string
}

func (v *probValue) Set(s string) error {
	x, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil || math.IsNaN(x) || (x < 0 || x > 1) && x != -1 {
		return fmt.Errorf("must be a probability from 0 to 1 (0: %s)", v.zero)
	}
	*v.p = x
	return nil
}

func (v *probValue) String() string { return strconv.FormatFloat(*v.p, 'g', -1, 64) }
func (v *probValue) Type() string   { return "float" }

func probFlag(f *pflag.FlagSet, p *float64, name string, def float64, zero, usage string) {
	*p = def
	f.Var(&probValue{p: p, zero: zero}, name, usage+" (0: "+zero+")")
}

// off is the library's value of a probability the user turned off: a
// negative probability never fires, where 0 picks the default.
func off(p float64) float64 {
	if p <= 0 {
		return -1
	}
	return p
}

// argv is the command line of one run of the CLI, as given, for the
// messages to name a flag the way the user typed it.
type argv []string

// spell is how the user typed flag name of cmd: "-s" or "--strategy" (the
// last time it was given), else "--" + name.
func (a argv) spell(cmd *cobra.Command, name string) string {
	long := "--" + name
	var short string
	if f := cmd.Flag(name); f != nil && f.Shorthand != "" {
		short = "-" + f.Shorthand
	}
	got := long
	for _, s := range a {
		switch {
		case s == "--":
			return got
		case s == long || strings.HasPrefix(s, long+"="):
			got = long
		case short != "" && strings.HasPrefix(s, short) && !strings.HasPrefix(s, "--"):
			got = short
		}
	}
	return got
}

// badFlag is the error of a bad value of flag name: "--name value: why".
func (a argv) badFlag(cmd *cobra.Command, name, value, why string, args ...any) error {
	return fmt.Errorf("%s %s: %s", a.spell(cmd, name), quote(value), fmt.Sprintf(why, args...))
}

// quote writes a value as a shell would need it: as is when it is plain,
// else in single quotes.
func quote(s string) string {
	if s != "" && !strings.ContainsAny(s, " \t\n'\"\\$`*?;&|<>()[]{}#~!") {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// flagError turns pflag's parse errors into one line that names the flag
// as typed and what it accepts: the range of the values above, and for the
// standard flags what their type takes.
func (a argv) flagError(cmd *cobra.Command, err error) error {
	var iv *pflag.InvalidValueError
	if !errors.As(err, &iv) {
		return err
	}
	f := iv.GetFlag()
	why := errors.Unwrap(iv).Error()
	var num *strconv.NumError
	if errors.As(iv, &num) {
		switch f.Value.Type() {
		case "bool":
			why = "must be true or false"
		case "uint64":
			why = fmt.Sprintf("must be a whole number from 0 to %d", uint64(math.MaxUint64))
		default:
			why = "must be a " + f.Value.Type()
		}
	}
	return a.badFlag(cmd, f.Name, iv.GetValue(), "%s", why)
}

// usageArgs checks a command's arguments: at most max (min at least),
// with what to say when they are missing.
func usageArgs(min, max int, missing string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		switch {
		case len(args) < min:
			return errors.New(missing)
		case len(args) > max:
			takes := "no arguments"
			switch {
			case max == 1 && min == 1:
				takes = "one argument"
			case max == 1:
				takes = "at most one argument"
			case max > 1:
				takes = fmt.Sprintf("at most %d arguments", max)
			}
			return fmt.Errorf("%s takes %s, got %d: %s (see locklab %s --help)", cmd.Name(), takes, len(args), cutList(quote, args), cmd.Name())
		}
		return nil
	}
}

// plural is one when n is 1, else many: the word for a count.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// listShown is how many items of a list a message shows before it cuts
// the rest to a count.
const listShown = 5

// cutList writes items, each through show, joined by sep (default " "):
// the first listShown of a longer list and how many more there are, so
// that 5000 --addr values make a line, not 80 KB.
func cutList(show func(string) string, items []string, sep ...string) string {
	join := " "
	if len(sep) > 0 {
		join = sep[0]
	}
	var out []string
	for i, s := range items {
		if i == listShown && len(items) > listShown+1 {
			out = append(out, fmt.Sprintf("and %d more", len(items)-listShown))
			break
		}
		out = append(out, show(s))
	}
	return strings.Join(out, join)
}
