// Package web holds the dashboard's built files (dist/, made from src/ by
// `npm run build`, see docs/dashboard.md), embedded so ptd serves them
// without a file on disk.
package web

import (
	"embed"
	"io/fs"
)

//go:embed all:dist
var dist embed.FS

// Dist is the built dashboard: index.html and assets/.
func Dist() fs.FS {
	sub, err := fs.Sub(dist, "dist")
	if err != nil {
		panic(err) // dist is embedded at build time; Sub of a valid name cannot fail
	}
	return sub
}
