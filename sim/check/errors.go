package check

import "errors"

// ErrInvalidHistory reports a history that cannot be checked: a fact that
// contradicts itself (a return before its invoke, a tenure that ends
// before it begins), an unknown operation kind, or a store event that names
// a write the history does not hold. The error's text names the fact.
var ErrInvalidHistory = errors.New("check: invalid history")

// ErrInvalidConfig reports a LinearConfig or LivenessSpec that cannot be
// used: a negative timeout, parallelism or bound, or a window that ends
// before it begins. The error's text names the values.
var ErrInvalidConfig = errors.New("check: invalid config")
