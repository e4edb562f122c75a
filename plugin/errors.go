package plugin

import "errors"

// ErrInput marks errors caused by what the plugins were given (a Profile, the configuration,
// an object someone else made) rather than by the API server: reconciling again without a
// change gives the same error, so controllers should report it, not retry it.
var ErrInput = errors.New("input error")
