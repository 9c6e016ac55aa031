// What each statement reads and writes on the server, for a reduction
// that knows which steps commute (harness.Touch).
//
// The resources:
//
//   - "row:" and a table and a key ("row:locklab_lock_table/lock:k"): the
//     row of a table whose primary key is its column key (the locks'
//     tables and the versioned row's, the only ones declared), its data,
//     its existence and its row lock. A statement whose WHERE names the
//     key as a parameter (key = $1), or an INSERT whose key is one,
//     touches that row alone: a SELECT reads it, a SELECT ... FOR UPDATE
//     (or SHARE) writes it, for it takes the row's lock, and an INSERT,
//     UPDATE or DELETE writes it.
//   - "table:" and a table: the table as a whole. A statement over the
//     whole table (no key, or a condition other than the key) writes it,
//     and every statement on one of its rows reads it: a whole-table
//     statement conflicts with each row's, and statements on two rows
//     commute. (The other way round, a row's write writing the table,
//     would make every two rows' writes conflict.)
//   - "advisory:" and a lock number ("advisory:-4159..."), or two
//     ("advisory:1,2", the other key space of the two-int4 functions):
//     the advisory lock. Every pg_advisory_* function that takes or
//     releases one writes it, try or not, session or transaction, shared
//     or not.
//
// No lock uses a sequence: their fences are 0.
//
// What a session holds lasts beyond its statement, and is released by
// another: a transaction's row locks and writes (and its
// pg_advisory_xact_lock) until COMMIT, ROLLBACK, END or ABORT, a session
// advisory lock until pg_advisory_unlock or the session's end. The store
// keeps, per connection, the names its open transaction touched (the
// server's transaction status says whether one is open) and the session
// advisory locks it may hold (taken unless the answer said false,
// released when an unlock said true). The statement that ends the
// transaction writes every name it touched; and since a lock closes a
// session whose statement failed (pglock's discard), which releases all
// it holds before its client's next step, every statement on a session
// writes what that session holds as well. A crash, or a time step that
// ends isolated sessions, releases what they hold outside any statement
// of theirs. The sessions a run's pool takes over from the run before
// hold nothing: the store closes every session left in a transaction, and
// the locks close the sessions they hold.
//
// A statement the store does not recognise is declared by no Touch; it
// may have taken anything, so every later statement of its session is
// undeclared too.

package postgres

import (
	"maps"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/locklab/locklab/harness"
	"github.com/locklab/locklab/strategies/pglock"
)

// keyedTables are the tables whose primary key is the column key: the
// only ones whose rows the store names.
var keyedTables = []string{pglock.LockTableName, pglock.RowTableName, ResourceTableName}

func rowRes(table, key string) string { return "row:" + table + "/" + key }
func tableRes(table string) string    { return "table:" + table }

// stmtKind is what a statement does to what its session holds.
type stmtKind int

const (
	stmtPlain      stmtKind = iota
	stmtEnd                 // ends the transaction: COMMIT, ROLLBACK, END, ABORT
	stmtLock                // takes a session advisory lock (or tries to)
	stmtUnlock              // releases one
	stmtUnlockAll           // pg_advisory_unlock_all
	stmtUndeclared          // a statement the store cannot declare
)

// stmt is a statement as the store understands it: what it does, and
// what it reads and writes itself.
type stmt struct {
	kind          stmtKind
	reads, writes []string
	// lock is the advisory lock a stmtLock or stmtUnlock names.
	lock string
}

var undeclared = stmt{kind: stmtUndeclared}

// nameKey names the advisory lock of lockKey's number by the key itself
// ("advisory:lock:x"), as the rows of the key are named by it: a worker
// that locks the key with its suffix (the harness's) then declares the
// same names as the others, once the harness takes the suffix away.
func (s *stmt) nameKey(lockKey string) {
	if lockKey == "" {
		return
	}
	num := "advisory:" + strconv.FormatInt(advisoryID(lockKey), 10)
	named := "advisory:" + lockKey
	if s.lock == num {
		s.lock = named
	}
	for _, ns := range [][]string{s.reads, s.writes} {
		for i, n := range ns {
			if n == num {
				ns[i] = named
			}
		}
	}
}

// The statements the store recognises, on SQL whose whitespace is one
// space and in upper case (sqlText). A transaction begins at its first
// statement's snapshot, not at BEGIN, which touches nothing; a
// serializable one is not recognised, for its reads may make another
// transaction's writes of other rows fail.
var (
	reBegin = regexp.MustCompile(`^(BEGIN|START TRANSACTION)( (WORK|TRANSACTION))?( ISOLATION LEVEL (READ COMMITTED|REPEATABLE READ|READ UNCOMMITTED)| READ WRITE| READ ONLY| (NOT )?DEFERRABLE)*$`)
	reEnd   = regexp.MustCompile(`^(COMMIT|END|ROLLBACK|ABORT)( (WORK|TRANSACTION))?( AND (NO )?CHAIN)?$|^ROLLBACK( WORK| TRANSACTION)? TO `)
	reSave  = regexp.MustCompile(`^(SAVEPOINT|RELEASE( SAVEPOINT)?) [A-Z_][A-Z0-9_]*$`)

	reAdvisory  = regexp.MustCompile(`^SELECT PG_(?P<try>TRY_)?ADVISORY_(?P<xact>XACT_)?(?P<op>LOCK|UNLOCK)(_SHARED)?\((?P<args>[^()]*)\)$`)
	reUnlockAll = regexp.MustCompile(`^SELECT PG_ADVISORY_UNLOCK_ALL\(\)$`)

	reSelect = regexp.MustCompile(`^SELECT ` + sqlColumns + ` FROM ` + sqlTable + ` ` + sqlWhere +
		`(?P<for> FOR (UPDATE|NO KEY UPDATE|SHARE|KEY SHARE)( NOWAIT| SKIP LOCKED)?)?$`)
	reDelete = regexp.MustCompile(`^DELETE FROM ` + sqlTable + ` ` + sqlWhere + sqlReturning + `$`)
	reUpdate = regexp.MustCompile(`^UPDATE ` + sqlTable + ` SET (?P<set>` + sqlAssign + `(, ` + sqlAssign + `)*) ` + sqlWhere + sqlReturning + `$`)
	reInsert = regexp.MustCompile(`^INSERT INTO ` + sqlTable + ` \((?P<cols>` + sqlColumns + `)\) VALUES \((?P<vals>[^()]*)\)` +
		`( ON CONFLICT( \(KEY\))? DO NOTHING)?` + sqlReturning + `$`)
	// A statement over a whole table: no key, nothing but conditions.
	reWhole = regexp.MustCompile(`^(SELECT ` + sqlColumns + ` FROM|DELETE FROM|TRUNCATE( TABLE)?) ` + sqlTable +
		`( WHERE ` + sqlCond + `( AND ` + sqlCond + `)*)?` + sqlReturning + `$`)
)

// The parts of the statements' patterns.
const (
	sqlName    = `[A-Z_][A-Z0-9_]*`
	sqlTable   = `(?P<table>` + sqlName + `)`
	sqlColumns = sqlName + `(, ` + sqlName + `)*`
	// A condition beside the key's: a column against a parameter or a
	// literal; no function, no subquery.
	sqlCond = sqlName + ` (=|<|>|<=|>=|<>|!=) (\$[0-9]+|-?[0-9]+|'[^']*')`
	// The key's equality, with conditions beside it.
	sqlWhere     = `WHERE (` + sqlCond + ` AND )*KEY = \$(?P<key>[0-9]+)( AND ` + sqlCond + `)*`
	sqlAssign    = sqlName + ` = [A-Z0-9_$+\- ]+?`
	sqlReturning = `( RETURNING ` + sqlColumns + `)?`
)

// group is the part of match m that re's group named g matched.
func group(re *regexp.Regexp, m []string, g string) string { return m[re.SubexpIndex(g)] }

// sqlText is sql as the store matches it: one space between words, upper
// case outside string literals (their case is kept), no trailing ";".
func sqlText(sql string) string {
	sql = strings.TrimSuffix(strings.TrimSpace(strings.Join(strings.Fields(sql), " ")), ";")
	parts := strings.Split(sql, "'")
	for i := 0; i < len(parts); i += 2 {
		parts[i] = strings.ToUpper(parts[i])
	}
	return strings.Join(parts, "'")
}

// statementArgs are the parameters of a statement, without the options
// pgx takes before them; false when an option rewrites the statement.
func statementArgs(args []any) ([]any, bool) {
	for len(args) > 0 {
		switch args[0].(type) {
		case pgx.QueryExecMode, pgx.QueryResultFormats, pgx.QueryResultFormatsByOID:
			args = args[1:]
			continue
		case pgx.QueryRewriter:
			return nil, false
		}
		break
	}
	return args, true
}

// classify is what statement sql with args does, and touches itself.
func classify(sql string, args []any) stmt {
	args, ok := statementArgs(args)
	q := sqlText(sql)
	if !ok || strings.Contains(q, ";") {
		return undeclared
	}
	switch {
	case reBegin.MatchString(q), reSave.MatchString(q):
		return stmt{kind: stmtPlain}
	case reEnd.MatchString(q):
		return stmt{kind: stmtEnd}
	case reUnlockAll.MatchString(q):
		return stmt{kind: stmtUnlockAll}
	}
	if m := reAdvisory.FindStringSubmatch(q); m != nil {
		return advisory(m, args)
	}
	if m := reSelect.FindStringSubmatch(q); m != nil {
		return rowStmt(group(reSelect, m, "table"), group(reSelect, m, "key"), args, group(reSelect, m, "for") != "")
	}
	if m := reDelete.FindStringSubmatch(q); m != nil {
		return rowStmt(group(reDelete, m, "table"), group(reDelete, m, "key"), args, true)
	}
	if m := reUpdate.FindStringSubmatch(q); m != nil {
		if set := group(reUpdate, m, "set"); strings.HasPrefix(set, "KEY ") || strings.Contains(set, ", KEY ") {
			return undeclared // it moves the row to another key
		}
		return rowStmt(group(reUpdate, m, "table"), group(reUpdate, m, "key"), args, true)
	}
	if m := reInsert.FindStringSubmatch(q); m != nil {
		return insert(group(reInsert, m, "table"), group(reInsert, m, "cols"), group(reInsert, m, "vals"), args)
	}
	if m := reWhole.FindStringSubmatch(q); m != nil {
		t := strings.ToLower(group(reWhole, m, "table"))
		if !slices.Contains(keyedTables, t) {
			return undeclared
		}
		return stmt{writes: []string{tableRes(t)}}
	}
	return undeclared
}

// rowStmt touches the row of table whose key is parameter param ("1" for
// $1): it reads the table, and reads the row or writes it.
func rowStmt(table, param string, args []any, write bool) stmt {
	table = strings.ToLower(table)
	key, ok := textArg(param, args)
	if !ok || !slices.Contains(keyedTables, table) {
		return undeclared
	}
	s := stmt{reads: []string{tableRes(table)}}
	if write {
		s.writes = []string{rowRes(table, key)}
	} else {
		s.reads = append(s.reads, rowRes(table, key))
	}
	return s
}

// insert writes the row whose key is the value given the column key.
func insert(table, cols, vals string, args []any) stmt {
	cs := strings.Split(cols, ", ")
	vs := strings.Split(vals, ", ")
	i := slices.Index(cs, "KEY")
	if len(cs) != len(vs) || i < 0 || !strings.HasPrefix(vs[i], "$") {
		return undeclared
	}
	return rowStmt(table, vs[i][1:], args, true)
}

// textArg is the text parameter $param.
func textArg(param string, args []any) (string, bool) {
	n, err := strconv.Atoi(param)
	if err != nil || n < 1 || n > len(args) {
		return "", false
	}
	s, ok := args[n-1].(string)
	return s, ok
}

// advisory is a pg_advisory_* call, m its match: the lock it names, as
// one or two numbers given as parameters or literals.
func advisory(m []string, args []any) stmt {
	var nums []string
	for a := range strings.SplitSeq(group(reAdvisory, m, "args"), ",") {
		a = strings.TrimSpace(a)
		for _, cast := range []string{"::BIGINT", "::INT8", "::INTEGER", "::INT4", "::INT"} {
			a = strings.TrimSuffix(a, cast)
		}
		n, ok := intArg(a, args)
		if !ok {
			return undeclared
		}
		nums = append(nums, n)
	}
	if len(nums) != 1 && len(nums) != 2 {
		return undeclared
	}
	s := stmt{lock: "advisory:" + strings.Join(nums, ",")}
	s.writes = []string{s.lock}
	lock := group(reAdvisory, m, "op") == "LOCK"
	switch {
	case !lock && group(reAdvisory, m, "try") != "":
		return undeclared // no such function
	case group(reAdvisory, m, "xact") != "":
		// A transaction's: the end of its transaction (or of its
		// statement, outside one) releases it.
		if !lock {
			return undeclared // no such function
		}
	case lock:
		s.kind = stmtLock
	default:
		s.kind = stmtUnlock
	}
	return s
}

// intArg is the integer a parameter ($1) or a literal stands for.
func intArg(a string, args []any) (string, bool) {
	if p, ok := strings.CutPrefix(a, "$"); ok {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > len(args) {
			return "", false
		}
		switch v := args[n-1].(type) {
		case int64:
			return strconv.FormatInt(v, 10), true
		case int32:
			return strconv.FormatInt(int64(v), 10), true
		case int:
			return strconv.Itoa(v), true
		case int16:
			return strconv.FormatInt(int64(v), 10), true
		}
		return "", false
	}
	n, err := strconv.ParseInt(a, 10, 64)
	return strconv.FormatInt(n, 10), err == nil
}

// pgSession is what one connection's session holds: the names its open
// transaction touched (written by its end; the tables it read, read by
// it), and the session advisory locks it may hold, each with how many
// times.
type pgSession struct {
	tx, txTables map[string]bool
	locks        map[string]int
	// unknown: the session ran a statement the store could not declare,
	// which may hold anything from then on.
	unknown bool
}

func newSession() *pgSession {
	return &pgSession{tx: map[string]bool{}, txTables: map[string]bool{}, locks: map[string]int{}}
}

// declare is the Touch of statement s on session h, whose transaction is
// open when inTx (the server's status before s), and notes in h what s
// adds to its transaction.
func (h *pgSession) declare(s stmt, inTx bool) *harness.Touch {
	if !inTx {
		clear(h.tx)
		clear(h.txTables)
	}
	if s.kind == stmtUndeclared {
		h.unknown = true
	}
	if h.unknown {
		return nil
	}
	t := &harness.Touch{Reads: slices.Clone(s.reads), Writes: slices.Clone(s.writes)}
	for _, n := range slices.Sorted(maps.Keys(h.tx)) {
		if !slices.Contains(t.Writes, n) {
			t.Writes = append(t.Writes, n)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(h.locks)) {
		if !slices.Contains(t.Writes, n) {
			t.Writes = append(t.Writes, n)
		}
	}
	for _, n := range slices.Sorted(maps.Keys(h.txTables)) {
		if !slices.Contains(t.Reads, n) {
			t.Reads = append(t.Reads, n)
		}
	}
	if inTx && s.kind != stmtEnd {
		for _, w := range s.writes {
			h.tx[w] = true
		}
		for _, r := range s.reads {
			if strings.HasPrefix(r, "table:") {
				h.txTables[r] = true
			} else {
				h.tx[r] = true
			}
		}
	}
	return t
}

// answered notes in h what statement s did to the session's advisory
// locks, given its error and the boolean it returned ("" for none): a
// lock is taken unless the answer said false (a failed one may have been
// taken), released when an unlock said true.
func (h *pgSession) answered(s stmt, err error, value string) {
	switch s.kind {
	case stmtLock:
		if err != nil || value != "false" {
			h.locks[s.lock]++
		}
	case stmtUnlock:
		if err == nil && value == "true" {
			if h.locks[s.lock]--; h.locks[s.lock] <= 0 {
				delete(h.locks, s.lock)
			}
		}
	case stmtUnlockAll:
		if err == nil {
			clear(h.locks)
		}
	}
}

// TimeTouch is what a time step of d does on the server (Advance): it ends
// the sessions of the clients cut off (isolated, not crashed), which
// releases what each holds, as the server's ROLLBACK of its transaction
// and its end would: it writes the names each session's statements write
// for what it holds (declare: the open transaction's names, the session
// advisory locks) and reads the tables its transaction read; and those
// clients' next statements on them fail, which the harness names as their
// reach. A step of less than a second ends nothing: it touches nothing.
// Nothing else of the server keeps time: the lock table's expiry is the
// clients' clocks', which the harness names.
//
// What a cut-off client's sessions hold changes only with its own
// statements, which read its reach, or a crash, an event: another
// client's step leaves the footprint as it is, and the footprint is what
// the step does wherever the step falls among the steps that touch none
// of it. A session that ran a statement the store could not declare may
// hold anything: the step touches everything.
var _ harness.TimeToucher = (*pgStore)(nil)

func (s *pgStore) TimeTouch(d time.Duration) (*harness.Touch, []*harness.Client) {
	if d < time.Second {
		return &harness.Touch{}, nil
	}
	s.mu.Lock()
	clients := maps.Clone(s.clients)
	s.mu.Unlock()
	// Isolated and Crashed take the run's lock: asked outside the
	// store's.
	var cut []*harness.Client
	for c := range clients {
		if c.Isolated() && !c.Crashed() {
			cut = append(cut, c)
		}
	}
	slices.SortFunc(cut, func(a, b *harness.Client) int { return a.ID() - b.ID() })
	reads, writes := map[string]bool{}, map[string]bool{}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, c := range cut {
		for _, h := range clients[c].tracer.sessions {
			if h.unknown {
				return nil, nil
			}
			for n := range h.tx {
				writes[n] = true
			}
			for n := range h.locks {
				writes[n] = true
			}
			for n := range h.txTables {
				reads[n] = true
			}
		}
	}
	return &harness.Touch{Reads: slices.Sorted(maps.Keys(reads)), Writes: slices.Sorted(maps.Keys(writes))}, cut
}
