package sandbox

import (
	"crypto/rand"
	"strings"
	"sync"
	"time"

	"github.com/oklog/ulid/v2"
)

// ID prefixes. IDs are prefixed ULIDs, so they sort by creation time and say
// what they name.
const (
	PrefixSandbox         = "sbx_"
	PrefixTemplateVersion = "tplv_"
	PrefixOrg             = "org_"
	PrefixProject         = "prj_"
	PrefixHost            = "host_"
	PrefixSnapshot        = "snap_"
	PrefixToken           = "tok_"
	PrefixSession         = "ses_"
	// PrefixTemplateBuild names a custom template's build;
	// PrefixTemplateUpload an uploaded build context or image tarball.
	PrefixTemplateBuild  = "tbld_"
	PrefixTemplateUpload = "tupl_"
)

var (
	idMu      sync.Mutex
	idEntropy = ulid.Monotonic(rand.Reader, 0)
)

// NewID returns prefix + a new monotonic ULID.
func NewID(prefix string) string {
	idMu.Lock()
	defer idMu.Unlock()
	return prefix + ulid.MustNew(ulid.Timestamp(time.Now()), idEntropy).String()
}

// ValidID reports whether id has the prefix and a well-formed ULID after it.
func ValidID(prefix, id string) bool {
	rest, ok := strings.CutPrefix(id, prefix)
	if !ok {
		return false
	}
	_, err := ulid.ParseStrict(rest)
	return err == nil
}
