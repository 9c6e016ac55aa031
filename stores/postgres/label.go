// How a PostgreSQL step reads in a timeline: the statement as its verb and
// table (sqlLabel) with its parameters, a time as milliseconds (which the
// renderers show as an offset from the epoch, "@30s") and the advisory
// lock's number as the lock key; the answer as what it says: the value a
// query returned ("true"), else the rows it touched ("1 row"), an error as
// its SQLSTATE and a short name ("23505 unique violation").

package postgres

import (
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// advisoryID is pglock.AdvisoryID: key's advisory lock number.
func advisoryID(key string) int64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	return int64(h.Sum64())
}

// pgArgs are a statement's parameters as a timeline shows them.
func pgArgs(args []any, lockKey string) []any {
	out := make([]any, len(args))
	for i, a := range args {
		switch v := a.(type) {
		case time.Time:
			out[i] = strconv.FormatInt(v.UnixMilli(), 10)
		case int64:
			if lockKey != "" && v == advisoryID(lockKey) {
				out[i] = lockKey
			} else {
				out[i] = v
			}
		default:
			out[i] = a
		}
	}
	return out
}

// pgReply is a statement's answer: value, what the query returned when it
// returned one value (pgValues records it), else its command tag's row
// count ("INSERT 0 1": "1 row"), else the tag ("BEGIN").
func pgReply(tag, value string) string {
	if value != "" {
		return value
	}
	f := strings.Fields(tag)
	if len(f) >= 2 {
		switch f[0] {
		case "INSERT", "DELETE", "UPDATE", "SELECT", "MERGE":
			if n, err := strconv.ParseInt(f[len(f)-1], 10, 64); err == nil {
				if n == 1 {
					return "1 row"
				}
				return fmt.Sprintf("%d rows", n)
			}
		}
	}
	return tag
}

// pgCodes name the SQLSTATEs the locks meet.
var pgCodes = map[string]string{
	"23505": "unique violation",
	"55P03": "lock not available",
	"40P01": "deadlock",
	"40001": "serialization failure",
	"25P02": "transaction aborted",
	"57P01": "admin shutdown",
	"57014": "query canceled",
	"42P01": "undefined table",
}

// pgErrorText is a server's error as a timeline shows it: its SQLSTATE and
// the code's name, or the start of its message.
func pgErrorText(code, message string) string {
	if n, ok := pgCodes[code]; ok {
		return code + " " + n
	}
	const max = 32
	if r := []rune(message); len(r) > max {
		message = string(r[:max-1]) + "…"
	}
	return code + " " + message
}

// pgError is an error whose text is pgErrorText's.
type pgError string

func (e pgError) Error() string { return string(e) }

// pgValue records the last boolean a connection's queries returned, for the
// step's answer: pg_try_advisory_lock's true or false says more than
// "SELECT 1". Its codec is registered on each of a client's connections.
type pgValue struct{ last string }

// boolCodec is pgtype's bool codec that records each value it scans.
type boolCodec struct {
	pgtype.BoolCodec
	v *pgValue
}

func (c boolCodec) PlanScan(m *pgtype.Map, oid uint32, format int16, target any) pgtype.ScanPlan {
	p := c.BoolCodec.PlanScan(m, oid, format, target)
	if p == nil {
		return nil
	}
	return recordingPlan{next: p, format: format, v: c.v}
}

type recordingPlan struct {
	next   pgtype.ScanPlan
	format int16
	v      *pgValue
}

func (p recordingPlan) Scan(src []byte, dst any) error {
	switch {
	case src == nil:
		p.v.last = "null"
	case p.format == pgtype.BinaryFormatCode && len(src) == 1:
		p.v.last = strconv.FormatBool(src[0] == 1)
	case p.format == pgtype.TextFormatCode && len(src) == 1:
		p.v.last = strconv.FormatBool(src[0] == 't')
	}
	return p.next.Scan(src, dst)
}

// recordBools makes m's bool codec record into v.
func recordBools(m *pgtype.Map, v *pgValue) {
	m.RegisterType(&pgtype.Type{Name: "bool", OID: pgtype.BoolOID, Codec: boolCodec{v: v}})
}
