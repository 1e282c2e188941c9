// Package scale says at which scale the long test scenarios run. `make test`
// runs them small — the same paths and the same oracle, fewer repetitions —
// so that it stays within CI's budget; `make test-long` sets BERTH_TEST_LONG
// and runs them at full scale. docs/reliability.md lists which scenario runs
// at which scale.
package scale

import (
	"os"
	"strconv"
)

// Env is the environment variable that asks for full scale.
const Env = "BERTH_TEST_LONG"

// Long reports whether the suites run at full scale: BERTH_TEST_LONG is set
// to a true value (1, t, true, ...). An unparsable value counts as set, so a
// typo runs more, never less.
func Long() bool {
	v, ok := os.LookupEnv(Env)
	if !ok || v == "" {
		return false
	}
	long, err := strconv.ParseBool(v)
	return err != nil || long
}

// Pick returns short in `make test` and long at full scale.
func Pick[T any](short, long T) T {
	if Long() {
		return long
	}
	return short
}
