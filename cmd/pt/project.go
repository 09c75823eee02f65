package main

import (
	"context"
	"fmt"
	"strings"

	platinum "github.com/platinum-dev/platinum/sdk/go"
)

// projectList is `pt project list`.
type projectList struct{ app *app }

const projectListSynopsis = "pt project list [--json]"

// Run prints the projects the token may see.
func (c *projectList) Run(ctx context.Context, args []string) error {
	fs := newFlags("pt project list")
	asJSON := fs.Bool("json", false, `print {"rows": [...]} as JSON`)
	pos, err := parseArgs(fs, projectListSynopsis, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr(usageText(fs, projectListSynopsis), "unexpected argument %q", pos[0])
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

// projectCreate is `pt project create NAME`.
type projectCreate struct{ app *app }

const projectCreateSynopsis = "pt project create NAME [--json]"

// Run creates the project (org admin token) and prints its ID.
func (c *projectCreate) Run(ctx context.Context, args []string) error {
	fs := newFlags("pt project create")
	asJSON := fs.Bool("json", false, "print the project as JSON")
	pos, err := parseArgs(fs, projectCreateSynopsis, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 || pos[0] == "" {
		return usageErr(usageText(fs, projectCreateSynopsis), "want exactly one project NAME")
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

// tokenCreate is `pt token create [--project ID] [--role member|admin]`.
type tokenCreate struct{ app *app }

const tokenCreateSynopsis = "pt token create [--project PRJ_ID] [--role member|admin] [--json]"

// Run issues a token of the caller's org and prints it (shown once).
func (c *tokenCreate) Run(ctx context.Context, args []string) error {
	fs := newFlags("pt token create")
	var req platinum.CreateTokenRequest
	fs.StringVar(&req.ProjectID, "project", "", "scope the token to project `PRJ_ID`: it sees and creates sandboxes only there")
	fs.StringVar(&req.Role, "role", "", "`ROLE`: member (default) or admin")
	asJSON := fs.Bool("json", false, `print {"token": {...}, "secret": "..."} as JSON`)
	pos, err := parseArgs(fs, tokenCreateSynopsis, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageErr(usageText(fs, tokenCreateSynopsis), "unexpected argument %q", pos[0])
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
