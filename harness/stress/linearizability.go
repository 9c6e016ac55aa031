// Linearizability: every critical section of a run is one operation on the
// register, recorded with its call and return times as a porcupine
// history, and checked against the register's sequential model.

package stress

import (
	"fmt"
	"io"
	"time"

	"github.com/anishathalye/porcupine"
)

// An operation of the history is one critical section, as the register
// saw it: the read when the client entered (the call) and the write when
// it left (the return). A lock is correct exactly when these
// read-modify-writes look atomic: each reads what the one before wrote.
// Two holders that overlap read the same value, and only one of them can
// be placed after the other: porcupine finds no order, the history is not
// linearizable. A critical section whose client died inside (a SIGKILLed
// worker) has no write: it is pending until the end of the run.

// rmwInput is an operation's input: the fence the client carried.
type rmwInput struct{ Fence int64 }

// rmwOutput is what the register answered.
type rmwOutput struct {
	Read    int64
	ReadOK  bool // the fence let the read through
	WriteOK bool // the write was made (false: refused by the fence, or never sent)
	Done    bool // the client left the critical section (false: it died inside)
}

// fencedState is the fenced register's state: the value and the highest
// fence seen.
type fencedState struct{ Value, Max int64 }

// Linearizability models: Linearizability.Model.
const (
	// ModelRegister is a register that a critical section reads and
	// writes back plus one, without a fence check (Options.NoFence, or a
	// strategy without fences).
	ModelRegister = "register"
	// ModelFencedRegister is the same register checking fences: an access
	// with a fence under the highest seen is refused and changes nothing.
	ModelFencedRegister = "fenced-register"
)

// Linearizability results.
const (
	Linearizable    = "linearizable"
	NotLinearizable = "not linearizable"
	Unknown         = "unknown" // the check timed out
)

// Linearizability is the outcome of porcupine's check of a run's history.
type Linearizability struct {
	Model  string `json:"model"`
	Result string `json:"result"`
	// Operations is the number of critical sections in the history, of
	// which Pending had no write (their client died inside).
	Operations int `json:"operations"`
	Pending    int `json:"pending,omitempty"`
	// Took is how long the check ran; it is bounded by
	// Options.CheckTimeout.
	Took time.Duration `json:"took_ns"`
}

// model is the porcupine model of the register that o's run uses.
func (o *Options) model() (string, porcupine.Model) {
	fenced := !o.NoFence
	name := ModelRegister
	if fenced {
		name = ModelFencedRegister
	}
	return name, porcupine.Model{
		Init: func() any { return fencedState{} },
		Step: func(state, input, output any) (bool, any) {
			s, in, out := state.(fencedState), input.(rmwInput), output.(rmwOutput)
			checked := fenced && in.Fence > 0
			switch {
			case !out.ReadOK:
				// Refused at the read (so at the write too): the fence was
				// under one already seen.
				return checked && in.Fence < s.Max, s
			case out.Read != s.Value:
				return false, s
			}
			if checked {
				if out.WriteOK && in.Fence < s.Max {
					return false, s
				}
				s.Max = max(s.Max, in.Fence)
			}
			if out.WriteOK {
				s.Value = out.Read + 1
			}
			return true, s
		},
		DescribeOperation: func(input, output any) string {
			in, out := input.(rmwInput), output.(rmwOutput)
			f := ""
			if in.Fence > 0 {
				f = fmt.Sprintf(" fence %d", in.Fence)
			}
			switch {
			case !out.ReadOK:
				return "refused" + f
			case out.WriteOK:
				return fmt.Sprintf("%d→%d%s", out.Read, out.Read+1, f)
			case out.Done:
				return fmt.Sprintf("read %d, write refused%s", out.Read, f)
			}
			return fmt.Sprintf("read %d, died%s", out.Read, f)
		},
		DescribeState: func(state any) string {
			s := state.(fencedState)
			if fenced {
				return fmt.Sprintf("%d (fence %d)", s.Value, s.Max)
			}
			return fmt.Sprint(s.Value)
		},
	}
}

// opEnter records the call of client id's operation; the caller holds
// r.mu. An operation the client left open (it died inside) stays pending.
func (r *recorder) opEnter(id int, fence, read int64, ok bool) {
	r.open[id] = len(r.ops)
	r.ops = append(r.ops, porcupine.Operation{
		ClientId: id, Input: rmwInput{Fence: fence}, Call: int64(r.now()),
		Output: rmwOutput{Read: read, ReadOK: ok},
	})
}

// opLeave records the return of client id's operation; the caller holds
// r.mu.
func (r *recorder) opLeave(id int, writeOK bool) {
	i, ok := r.open[id]
	if !ok {
		return
	}
	delete(r.open, id)
	op := &r.ops[i]
	out := op.Output.(rmwOutput)
	out.WriteOK, out.Done = writeOK, true
	op.Output, op.Return = out, int64(r.now())
}

// linearizability checks the history, within o.CheckTimeout; the caller
// holds r.mu. Pending operations return at the end of the run.
func (r *recorder) linearizability(end time.Duration) (*Linearizability, porcupine.Model, porcupine.LinearizationInfo) {
	name, model := r.o.model()
	ops := make([]porcupine.Operation, len(r.ops))
	copy(ops, r.ops)
	lin := &Linearizability{Model: name, Operations: len(ops)}
	for i := range ops {
		if !ops[i].Output.(rmwOutput).Done {
			ops[i].Return = int64(end) + 1
			lin.Pending++
		}
	}
	t0 := time.Now()
	res, info := porcupine.CheckOperationsVerbose(model, ops, r.o.CheckTimeout)
	lin.Took = time.Since(t0)
	switch res {
	case porcupine.Ok:
		lin.Result = Linearizable
	case porcupine.Illegal:
		lin.Result = NotLinearizable
	default:
		lin.Result = Unknown
	}
	return lin, model, info
}

// Visualize writes porcupine's HTML visualization of the run's history
// to w: every critical section on a timeline per client and, when the
// history is not linearizable, the longest orders porcupine found before
// it got stuck. The page is self-contained; it grows with the history
// (a few hundred bytes per critical section).
func (r *Report) Visualize(w io.Writer) error {
	if r.Linearizability == nil {
		return fmt.Errorf("stress: the run's history was not checked")
	}
	return porcupine.Visualize(r.model, r.info, w)
}
