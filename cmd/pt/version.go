package main

import (
	"context"
	"flag"
	"fmt"
	"runtime"
	"runtime/debug"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// buildVersion is set at link time (-ldflags "-X main.buildVersion=v1.2.3");
// otherwise the module version from the build info is used.
var buildVersion = ""

// version returns pt's version.
func version() string {
	if buildVersion != "" {
		return buildVersion
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// versionCmd is `pt version`. It needs no ptd.
type versionCmd struct{ app *app }

// bind binds the flags; the returned run prints pt's, the SDK's and Go's
// versions.
func (c *versionCmd) bind(fs *flag.FlagSet) runFunc {
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		var err error
		if len(pos) > 0 {
			return in.usageErr("unexpected argument %q", pos[0])
		}
		_, err = fmt.Fprintf(c.app.stdout, "pt %s (sdk %s, %s %s/%s)\n", version(), platinum.Version, runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return err
	}
}
