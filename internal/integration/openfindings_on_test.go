//go:build openfindings

package integration

// openFindings adds the cases of open findings to tests that otherwise run in make test.
const openFindings = true
