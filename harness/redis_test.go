// The harness's tests run Redis's strategies on real Redis servers. This
// external test file links Redis's store into the test binary, as a
// program that runs them imports it: its init registers it with the
// harness, and the package's internal tests find it in the registry like
// any store. (They cannot import stores/redis themselves: it imports the
// harness.)

package harness_test

import _ "github.com/locklab/locklab/stores/redis" // registers the Redis store
