package archive

// Internals for tests.
var (
	RawFrame = rawFrame
	Encode   = encode
)
