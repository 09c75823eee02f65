package main

import (
	"context"
	"flag"
	"fmt"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

const projectListSynopsis = "pt project list [--json]"

// projectList is `pt project list`: the projects the token may see.
func projectList(a *app) verb {
	return listAll(a, "ID\tNAME\tDEFAULT\tCREATED",
		func(cl *platinum.Client) func(context.Context) ([]platinum.Project, error) { return cl.Projects.List },
		func(p *platinum.Project) []string {
			def := ""
			if p.Default {
				def = "yes"
			}
			return []string{p.ID, p.Name, orDash(def), formatTime(p.CreatedAt)}
		})
}

// projectCreate is `pt project create NAME`.
type projectCreate struct{ app *app }

const projectCreateSynopsis = "pt project create NAME [--json]"

// bind binds the flags; the returned run creates the project (org admin
// token) and prints its ID.
func (c *projectCreate) bind(fs *flag.FlagSet) runFunc {
	asJSON := jsonFlag(fs, "print the project as JSON")
	return callRun(c.app, oneName("want exactly one project NAME"), func(ctx context.Context, cl *platinum.Client, pos []string) (*platinum.Project, error) {
		return cl.Projects.Create(ctx, pos[0])
	}, jsonOrLine(c.app, asJSON, func(p *platinum.Project) string { return p.ID }))
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
	asJSON := jsonFlag(fs, `print {"token": {...}, "secret": "..."} as JSON`)
	type created struct {
		Token  *platinum.Token `json:"token"`
		Secret string          `json:"secret"`
	}
	return callRun(c.app, noArgs, func(ctx context.Context, cl *platinum.Client, _ []string) (created, error) {
		tok, secret, err := cl.Tokens.Create(ctx, req)
		return created{tok, secret}, err
	}, jsonOr(c.app, asJSON, func(v created) error {
		fmt.Fprintln(c.app.stdout, v.Secret)
		fmt.Fprintln(c.app.stderr, "save the token now: it is not shown again")
		return nil
	}))
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
	asJSON := jsonFlag(fs, "print the quota as JSON")
	return callRun(c.app, oneName("want exactly one ORG_ID"), func(ctx context.Context, cl *platinum.Client, pos []string) (*platinum.OrgQuota, error) {
		q, err := cl.Orgs.Quota(ctx, pos[0])
		if err != nil || (*maxSbx == -2 && *maxCPU == -2 && *maxRAM == -2) {
			return q, err
		}
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
		return cl.Orgs.SetQuota(ctx, pos[0], o)
	}, jsonOr(c.app, asJSON, func(q *platinum.OrgQuota) error {
		tw := table(c.app.stdout)
		fmt.Fprintln(tw, "LIMIT\tMAX\tUSED")
		fmt.Fprintf(tw, "sandboxes\t%d\t%d\n", q.Limits.MaxSandboxes, q.Usage.Sandboxes)
		fmt.Fprintf(tw, "cpu\t%g\t%g\n", q.Limits.MaxCPU, q.Usage.CPU)
		fmt.Fprintf(tw, "ram_mb\t%d\t%d\n", q.Limits.MaxRAMMB, q.Usage.RAMMB)
		return tw.Flush()
	}))
}
