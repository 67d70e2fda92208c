// Package apicheck holds the test that keeps tenure's public API made of
// its own types (TestPublicAPIOwnsItsTypes). In the core packages (fence
// and its stores, election, ownership, ring, fleet, balance, router,
// grpcroute; generated code excepted) no exported type is an alias of
// another tenure package's type, no exported variable or constant is
// another tenure package's, and no exported signature, field or method
// names a type of an internal package. A reader of go doc sees every type
// of the API with its fields, can name it, and finds each idea under one
// public name. It has no code of its own: the test reads the packages'
// export data (go list -export) and their sources.
package apicheck
