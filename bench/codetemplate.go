package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/platinum-dev/platinum/internal/benchkit"
	"github.com/platinum-dev/platinum/internal/ptdtest"
)

// codeTemplateBench measures a cold build of the code-interpreter template
// (docs/code-interpreter.md, "The template"): its own ptd with an empty
// template cache (a new temp dir unless cacheDir names one), so pt-base is
// debootstrapped first and the scientific stack is installed on top; each
// build is timed from its build call to "ready", and the cached tarballs'
// sizes are printed. A second build of each (new versions, cache hits)
// shows what every later build costs.
func codeTemplateBench(root, cacheDir string) error {
	if cacheDir == "" {
		dir, err := os.MkdirTemp("/var/tmp", "pt-template-cache-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		cacheDir = dir
	}
	if m, _ := filepath.Glob(filepath.Join(cacheDir, "*.tar")); len(m) > 0 {
		return fmt.Errorf("template cache %s is not empty: a cold build needs an empty one", cacheDir)
	}
	d, err := ptdtest.Start(ptdtest.Options{RepoRoot: root, ExtraArgs: []string{"--template-cache", cacheDir}})
	defer d.Stop()
	if err != nil {
		return err
	}
	c := &benchkit.Client{URL: d.URL, Token: d.Token}
	fmt.Printf("code-interpreter template build (cache %s), %s\n\n", cacheDir, time.Now().UTC().Format(time.RFC3339))
	for _, pass := range []string{"cold", "cached"} {
		for _, slug := range []string{"pt-base", "code-interpreter"} {
			took, size, err := buildTemplate(c, slug)
			if err != nil {
				return err
			}
			fmt.Printf("%-7s build %-17s %8.1f s   rootfs %6.0f MB\n", pass, slug, took.Seconds(), float64(size)/1e6)
		}
	}
	tars, _ := filepath.Glob(filepath.Join(cacheDir, "*.tar"))
	for _, t := range tars {
		if st, err := os.Stat(t); err == nil {
			fmt.Printf("cached tarball %-45s %6.0f MB\n", filepath.Base(t), float64(st.Size())/1e6)
		}
	}
	return nil
}

// buildTemplate starts a new version's build of slug and waits for it,
// returning the wall time from the call to ready and the version's size.
func buildTemplate(c *benchkit.Client, slug string) (time.Duration, int64, error) {
	t0 := time.Now()
	st, b, err := c.Do("POST", "/v1/templates/"+slug+"/builds", nil)
	if err != nil || st >= 300 {
		return 0, 0, fmt.Errorf("build %s: %d %s %v", slug, st, b, err)
	}
	var v struct {
		ID     string `json:"id"`
		Status string `json:"status"`
	}
	json.Unmarshal(b, &v)
	for time.Since(t0) < 60*time.Minute {
		_, b, err := c.Do("GET", "/v1/templates/"+slug+"/versions", nil)
		if err != nil {
			return 0, 0, err
		}
		var list struct {
			Rows []struct {
				ID        string `json:"id"`
				Status    string `json:"status"`
				Error     string `json:"error"`
				SizeBytes int64  `json:"size_bytes"`
			} `json:"rows"`
		}
		if err := json.Unmarshal(b, &list); err != nil {
			return 0, 0, fmt.Errorf("versions of %s: %w: %s", slug, err, b)
		}
		for _, ver := range list.Rows {
			if ver.ID != v.ID {
				continue
			}
			switch ver.Status {
			case "ready":
				return time.Since(t0), ver.SizeBytes, nil
			case "failed":
				return 0, 0, fmt.Errorf("build %s failed: %s", slug, ver.Error)
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return 0, 0, fmt.Errorf("build %s did not finish in an hour", slug)
}
