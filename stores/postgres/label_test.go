package postgres

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/locklab/locklab/harness"
)

// A statement's parameters, answer and error read as what they say.
func TestPGLabels(t *testing.T) {
	at := harness.Epoch.Add(30 * time.Second)
	got := pgArgs([]any{"lock:k", at, advisoryID("lock:k"), int64(7)}, "lock:k")
	assert.Equal(t, []any{"lock:k", "1704067230000", "lock:k", int64(7)}, got)
	assert.Equal(t, "1704067230000", got[1], "a time shows as Unix milliseconds, which renderers show as @30s")

	assert.Equal(t, "1 row", pgReply("INSERT 0 1", ""))
	assert.Equal(t, "0 rows", pgReply("DELETE 0", ""))
	assert.Equal(t, "2 rows", pgReply("UPDATE 2", ""))
	assert.Equal(t, "1 row", pgReply("SELECT 1", ""))
	assert.Equal(t, "true", pgReply("SELECT 1", "true"))
	assert.Equal(t, "BEGIN", pgReply("BEGIN", ""))

	assert.Equal(t, "23505 unique violation", pgErrorText("23505", `duplicate key value violates unique constraint "locklab_lock_table_pkey"`))
	assert.Equal(t, "55P03 lock not available", pgErrorText("55P03", `could not obtain lock on row in relation "locklab_lock_rows"`))
	assert.Equal(t, "XX000 an error whose message is long …", pgErrorText("XX000", "an error whose message is long enough to be cut"))
	assert.Equal(t, "23505 unique violation", pgError(pgErrorText("23505", "")).Error(), "shown as error: 23505 unique violation")
}

// The bool codec records what a query returned, in both formats, and
// scans it as pgtype's does.
func TestPGBoolRecorded(t *testing.T) {
	m := pgtype.NewMap()
	var v pgValue
	recordBools(m, &v)
	for _, tc := range []struct {
		format int16
		src    []byte
		want   bool
	}{
		{pgtype.BinaryFormatCode, []byte{1}, true},
		{pgtype.BinaryFormatCode, []byte{0}, false},
		{pgtype.TextFormatCode, []byte("t"), true},
		{pgtype.TextFormatCode, []byte("f"), false},
	} {
		var got bool
		require.NoError(t, m.Scan(pgtype.BoolOID, tc.format, tc.src, &got))
		assert.Equal(t, tc.want, got)
		assert.Equal(t, map[bool]string{true: "true", false: "false"}[tc.want], v.last)
	}
}
