// Package remote carries the store contract (internal/store) over HTTP, so
// that a ptd host process (`--role=host --join URL`) runs sandboxes
// without the store's URL: its Client is a store.Store whose every call an
// api ptd serves from its own store (NewHandler, mounted at Prefix on the
// api's API listener). It passes the shared suite (storetest) over SQLite
// and PostgreSQL like the stores it fronts.
//
// # Protocol
//
// Plain HTTP and JSON on net/http: a call is POST Prefix+<Method> with a
// JSON array of the arguments after ctx, answered 200
// {"results":[…]} (the results before the error) or an error status with
// {"error":{"code":…,"message":…}}. No RPC library: net/rpc has no ctx and
// no streams, and Connect or gRPC want a protobuf message per method,
// while this contract is a Go interface (about a hundred methods) that
// changes often. Here the server dispatches by reflection over
// store.Store's method set (one table built at init), so a new store
// method is served with no new code, and the Client's methods are one-line
// calls of generic helpers that ./gen writes from the same interface
// (go generate; TestGeneratedClientIsCurrent fails when client_gen.go is
// stale). A method whose types cannot cross the wire panics at init, so
// any test finds it. Dial compares a fingerprint of the two sides' method
// sets and logs a warning when they differ (ptds of two versions): a call
// the server lacks fails with a message that says so.
//
// Values travel by Go field name, not by their json tags (the records'
// tags are the public API's, and many fields a store keeps, such as
// Sandbox.Env or Version, are json:"-" there); nil and empty maps, slices
// and byte slices stay apart, and times keep their nanoseconds and UTC,
// so records compare with cmp.Diff after a round trip as the store's
// package doc promises. An `any` argument (AddEvent's data) travels as the
// JSON the store would write; an error argument as its message.
//
// Errors keep their category: the server sends a stable code for each
// sandbox error category (and for a context's end) with the message, and
// the client returns an error with that message wrapping the same
// sentinel, so errors.Is(err, store.ErrNotFound) and the like hold as with
// a local store. A server that cannot be reached, or an answer that is not
// the protocol's (a proxy's 502), is sandbox.ErrUnavailable.
//
// # By hand
//
//   - ModifySandbox takes a closure, which cannot cross the wire. The
//     client runs a compare-and-swap loop instead: GetSandbox, fn,
//     UpdateSandbox at the version read; on ErrConflict it reads again and
//     starts over if the version moved (fn runs again, on the fresh
//     record), or returns the conflict if not (fn's name is taken). No
//     change is lost, as the contract asks. One Client's calls on one
//     sandbox queue for each other, as a local store's queue on the row
//     lock; only writers of other processes make it retry.
//   - LockKey is a held request: the server takes the lock, writes a line,
//     and holds the lock until the request ends, which the client's unlock
//     does, and so does the death of the client's connection (the
//     request's context ends; TCP keepalive finds a peer that vanished).
//     ctx bounds the wait, not the hold, as with a local store.
//   - Client.ListenEvents follows a stream with a line per commit the
//     handler's listen function reports (bursts coalesced, a keepalive
//     line every 15s), reconnecting until its ctx ends; it is what ptd's
//     event feed subscribes to, as it does to the PostgreSQL store's.
//   - Close closes the Client's idle connections; later calls return
//     ErrClosed. It never closes the server's store.
//
// # Security
//
// The endpoint hands out every org's data, tokens' hashes and sealed
// credentials included, to whoever holds the host token: a host with the
// token can do all that a host with the store's URL could. Only the api
// ptd's API listener mounts it, never the listener sandboxes reach, and the
// token is compared by the caller's authorize function before anything
// runs.
package remote
