package scenario_test

// `make test-integration` passes -ginkgo.* flags to every package under
// test/perf; importing ginkgo defines them, so these plain tests run there
// too.
import _ "github.com/onsi/ginkgo/v2"
