package redisaddr

import (
	"errors"
	"strings"
	"testing"

	"github.com/locklab/locklab"
)

// No error of Parse shows the password of a password@host:port address.
func TestParseErrorsHidePassword(t *testing.T) {
	for _, a := range []string{"s3cret@localhost", "s3cret@localhost:redis", "s3cret@localhost:70000", "s3cret@:6379", "redis://:s3cret@localhost:x"} {
		_, err := Parse(a)
		if !errors.Is(err, locklab.ErrInvalid) {
			t.Fatalf("%s: %v, want ErrInvalid", a, err)
		}
		if strings.Contains(err.Error(), "s3cret") || !strings.Contains(err.Error(), "xxxxx") {
			t.Errorf("%s: the message shows the password or masks nothing: %v", a, err)
		}
	}
}
