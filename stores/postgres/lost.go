// A reply lost with its connection (lose(cN)): the socket lets the server
// carry the statement out, swallows its answer, and ends the connection.

package postgres

import (
	"encoding/binary"

	"github.com/locklab/locklab/harness"
)

// readLosing is Read while the socket loses the answer of the statement
// under way. The server's messages before the statement's result (a
// prepared statement's descriptions, a DataRow) reach pgx as they come;
// from the result on (CommandComplete, EmptyQueryResponse or
// ErrorResponse) the socket reads and drops everything up to
// ReadyForQuery, by which the server has carried the statement out (and
// committed it, outside a transaction), then closes the connection, which
// ends the session, and fails the read. lostTag keeps the result's
// command tag for the step's event.
func (c *pgSocket) readLosing(b []byte) (int, error) {
	for {
		if len(c.pass) > 0 {
			n := copy(b, c.pass)
			c.pass = c.pass[n:]
			return n, nil
		}
		for len(c.in) >= 5 {
			size := 1 + int(binary.BigEndian.Uint32(c.in[1:5]))
			if len(c.in) < size {
				break
			}
			msg := c.in[:size]
			c.in = c.in[size:]
			switch t := msg[0]; {
			case c.cut && t == 'Z':
				c.lose.Store(false)
				c.in = nil
				c.Close()
				return 0, harness.ErrLostReply
			case c.cut:
			case t == 'C' || t == 'I' || t == 'E':
				c.cut = true
				if t == 'C' {
					c.lostTag = string(msg[5 : len(msg)-1])
				}
			default:
				c.pass = append(c.pass, msg...)
			}
		}
		if len(c.pass) > 0 {
			continue
		}
		var buf [4096]byte
		n, err := c.Conn.Read(buf[:])
		c.in = append(c.in, buf[:n]...)
		if err != nil && n == 0 {
			return 0, err
		}
	}
}
