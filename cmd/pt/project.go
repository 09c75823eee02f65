package main

import (
	"context"
	"flag"
	"fmt"
	"strings"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// projectList is `pt project list`.
type projectList struct{ app *app }

const projectListSynopsis = "pt project list [--json]"

// bind binds the flags; the returned run prints the projects the token may
// see.
func (c *projectList) bind(fs *flag.FlagSet) runFunc {
	asJSON := fs.Bool("json", false, `print {"rows": [...]} as JSON`)
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		if len(pos) > 0 {
			return in.usageErr("unexpected argument %q", pos[0])
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		rows, err := cl.Projects.List(ctx)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(c.app.stdout, struct {
				Rows []platinum.Project `json:"rows"`
			}{rows})
		}
		tw := table(c.app.stdout)
		fmt.Fprintln(tw, "ID\tNAME\tDEFAULT\tCREATED")
		for _, p := range rows {
			def := ""
			if p.Default {
				def = "yes"
			}
			fmt.Fprintln(tw, strings.Join([]string{p.ID, p.Name, orDash(def), formatTime(p.CreatedAt)}, "\t"))
		}
		return tw.Flush()
	}
}

// projectCreate is `pt project create NAME`.
type projectCreate struct{ app *app }

const projectCreateSynopsis = "pt project create NAME [--json]"

// bind binds the flags; the returned run creates the project (org admin
// token) and prints its ID.
func (c *projectCreate) bind(fs *flag.FlagSet) runFunc {
	asJSON := fs.Bool("json", false, "print the project as JSON")
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		if len(pos) != 1 || pos[0] == "" {
			return in.usageErr("want exactly one project NAME")
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		p, err := cl.Projects.Create(ctx, pos[0])
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(c.app.stdout, p)
		}
		fmt.Fprintln(c.app.stdout, p.ID)
		return nil
	}
}

// tokenCreate is `pt token create [--project ID] [--role member|admin]`.
type tokenCreate struct{ app *app }

const tokenCreateSynopsis = "pt token create [--project PRJ_ID] [--role member|admin] [--json]"

// bind binds the flags; the returned run issues a token of the caller's org
// and prints it (shown once).
func (c *tokenCreate) bind(fs *flag.FlagSet) runFunc {
	var req platinum.CreateTokenRequest
	fs.StringVar(&req.ProjectID, "project", "", "scope the token to project `PRJ_ID`: it sees and creates sandboxes only there")
	fs.StringVar(&req.Role, "role", "", "`ROLE`: member (default) or admin")
	asJSON := fs.Bool("json", false, `print {"token": {...}, "secret": "..."} as JSON`)
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		if len(pos) > 0 {
			return in.usageErr("unexpected argument %q", pos[0])
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		tok, secret, err := cl.Tokens.Create(ctx, req)
		if err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(c.app.stdout, struct {
				Token  *platinum.Token `json:"token"`
				Secret string          `json:"secret"`
			}{tok, secret})
		}
		fmt.Fprintln(c.app.stdout, secret)
		fmt.Fprintln(c.app.stderr, "save the token now: it is not shown again")
		return nil
	}
}

// orgQuota is `pt org quota ORG_ID [--max-sandboxes N] [--max-cpu N]
// [--max-ram-mb N]`: show an org's quotas, or set its overrides (platform
// admin token; a flag set to -1 returns that limit to the server default).
type orgQuota struct{ app *app }

const orgQuotaSynopsis = "pt org quota ORG_ID [--max-sandboxes N] [--max-cpu N] [--max-ram-mb N] [--json]"

// bind binds the flags; the returned run prints the org's limits and usage,
// after setting any given flags.
func (c *orgQuota) bind(fs *flag.FlagSet) runFunc {
	maxSbx := fs.Int("max-sandboxes", -2, "set the org's limit on active sandboxes (`N`; 0 none, -1 server default)")
	maxCPU := fs.Float64("max-cpu", -2, "set the org's limit on active vCPUs (`N`; 0 none, -1 server default)")
	maxRAM := fs.Int("max-ram-mb", -2, "set the org's limit on active memory in MB (`N`; 0 none, -1 server default)")
	asJSON := fs.Bool("json", false, "print the quota as JSON")
	return func(ctx context.Context, in *input) error {
		pos := in.pos
		if len(pos) != 1 || pos[0] == "" {
			return in.usageErr("want exactly one ORG_ID")
		}
		cl, err := c.app.client()
		if err != nil {
			return err
		}
		q, err := cl.Orgs.Quota(ctx, pos[0])
		if err != nil {
			return err
		}
		if *maxSbx != -2 || *maxCPU != -2 || *maxRAM != -2 {
			o := q.Overrides
			if *maxSbx != -2 {
				o.MaxSandboxes = nil
				if *maxSbx >= 0 {
					o.MaxSandboxes = maxSbx
				}
			}
			if *maxCPU != -2 {
				o.MaxCPU = nil
				if *maxCPU >= 0 {
					o.MaxCPU = maxCPU
				}
			}
			if *maxRAM != -2 {
				o.MaxRAMMB = nil
				if *maxRAM >= 0 {
					o.MaxRAMMB = maxRAM
				}
			}
			if q, err = cl.Orgs.SetQuota(ctx, pos[0], o); err != nil {
				return err
			}
		}
		if *asJSON {
			return writeJSON(c.app.stdout, q)
		}
		tw := table(c.app.stdout)
		fmt.Fprintln(tw, "LIMIT\tMAX\tUSED")
		fmt.Fprintf(tw, "sandboxes\t%d\t%d\n", q.Limits.MaxSandboxes, q.Usage.Sandboxes)
		fmt.Fprintf(tw, "cpu\t%g\t%g\n", q.Limits.MaxCPU, q.Usage.CPU)
		fmt.Fprintf(tw, "ram_mb\t%d\t%d\n", q.Limits.MaxRAMMB, q.Usage.RAMMB)
		return tw.Flush()
	}
}
