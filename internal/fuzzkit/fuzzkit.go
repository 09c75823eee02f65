// Package fuzzkit is what the fuzz targets of the API transports (REST,
// E2B, Daytona) share: a control plane over SQLite, an object store on disk
// and an instant host (Host), and the two checks every target makes of a
// refused request (docs/testing.md, "Fuzzing"): the whole store and the
// host's call count read the same before and after (State), and accepted
// calls are let finish their background work before the next input
// (Settle).
package fuzzkit

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/internal/artifacts"
	"github.com/platinum-dev/platinum/internal/controlplane"
	"github.com/platinum-dev/platinum/internal/events"
	fsstore "github.com/platinum-dev/platinum/internal/objstore/fs"
	"github.com/platinum-dev/platinum/internal/preview"
	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/secrets"
	"github.com/platinum-dev/platinum/internal/sessions"
	"github.com/platinum-dev/platinum/internal/store"
	"github.com/platinum-dev/platinum/internal/store/sqlite"
	"github.com/platinum-dev/platinum/internal/tenancy"
)

// Token is the admin token Env bootstraps.
const Token = "tok"

// Env is one control plane for a fuzz target. Create it with New.
type Env struct {
	CP        *controlplane.Service
	Tenancy   *tenancy.Service
	Events    *events.Service
	Artifacts *artifacts.Service
	Sessions  *sessions.Service
	Store     *sqlite.Store
	Host      *Host
}

// New builds an Env: SQLite in a temporary directory, secrets sealed, an
// object store on disk (archives, backups, artifacts, workspaces), preview
// URLs signed, agent initialisation skipped, admin token Token. tb's
// cleanup closes it.
func New(tb testing.TB) *Env {
	tb.Helper()
	ctx := context.Background()
	dir := tb.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(dir, "pt.db"), nil)
	if err != nil {
		tb.Fatal(err)
	}
	h := NewHost(tb)
	cfg := controlplane.DefaultConfig()
	key, err := secrets.LoadOrCreateKey(filepath.Join(dir, "secrets.key"))
	if err != nil {
		tb.Fatal(err)
	}
	if cfg.Sealer, err = secrets.New(key); err != nil {
		tb.Fatal(err)
	}
	if cfg.Objects, err = fsstore.Open(filepath.Join(dir, "objects")); err != nil {
		tb.Fatal(err)
	}
	signer, err := preview.NewSigner(key)
	if err != nil {
		tb.Fatal(err)
	}
	cfg.Preview = preview.NewIssuer(preview.DefaultConfig(), signer)
	log := slog.New(slog.DiscardHandler)
	feed := &events.Feed{}
	fst := feed.Wrap(st) // every part's commits wake event readers, as in ptd
	tn := tenancy.New(tenancy.DefaultConfig(), fst, log)
	cp := controlplane.New(cfg, fst, h, tn, log)
	cp.SkipAgentInit()
	ev := events.New(events.DefaultConfig(), fst, feed, log)
	artCfg := artifacts.DefaultConfig()
	artCfg.Objects = cfg.Objects
	art := artifacts.New(artCfg, fst, cp, log)
	sesCfg := sessions.DefaultConfig()
	sesCfg.Objects = cfg.Objects
	ses := sessions.New(sesCfg, fst, cp, tn, log)
	if _, err := tn.Bootstrap(ctx, Token); err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		ses.Close()
		cp.Close()
		ev.Close()
		st.Close()
	})
	return &Env{CP: cp, Tenancy: tn, Events: ev, Artifacts: art, Sessions: ses, Store: st, Host: h}
}

// State is what a refused request must leave as it was: every row of every
// table of the store, and how many calls that change something the host
// has had.
type State struct {
	Tables    map[string][]string
	HostCalls int64
}

// State reads the current State.
func (e *Env) State(t *testing.T) State {
	t.Helper()
	calls := e.Host.Calls()
	tables, err := e.Store.Dump(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(tables) < 10 {
		t.Fatalf("the store has only %d tables", len(tables))
	}
	return State{Tables: tables, HostCalls: calls}
}

// Unchanged fails t, naming what, when the State is not before.
func (e *Env) Unchanged(t *testing.T, before State, what string) {
	t.Helper()
	if d := cmp.Diff(before, e.State(t)); d != "" {
		t.Fatalf("%s changed the store or the host (-before +after):\n%s", what, d)
	}
}

// Check sends one input (do) and holds the two properties every API
// surface's fuzz targets hold (docs/testing.md): no input is a server
// error; a refused one (4xx) answers in the surface's error shape
// (badBody says what is wrong with the body, "" when nothing) and changes
// nothing in the store or on the host; an accepted one is let settle.
// what names the input in failures.
func (e *Env) Check(t *testing.T, what string, do func() (int, []byte), badBody func(status int, body []byte) string) (int, []byte) {
	t.Helper()
	before := e.State(t)
	code, answer := do()
	what = fmt.Sprintf("%s: %d %s", what, code, answer)
	t.Log(what)
	switch {
	case code >= 500:
		t.Fatalf("%s (bad input must be a 4xx)", what)
	case code >= 400:
		if why := badBody(code, answer); why != "" {
			t.Fatalf("%s: %s", what, why)
		}
		e.Unchanged(t, before, what)
	default:
		e.Settle(t)
	}
	return code, answer
}

// Settle waits until work an accepted call started in the background (a
// create provisioning, a snapshot being taken, a session's sandbox) has
// stopped changing the store: no sandbox, snapshot or session is on its
// way somewhere and two reads 5 ms apart agree.
func (e *Env) Settle(t *testing.T) {
	t.Helper()
	prev := e.State(t)
	for range 2000 {
		time.Sleep(5 * time.Millisecond)
		cur := e.State(t)
		if cmp.Equal(prev, cur) && !e.busy(t) {
			return
		}
		prev = cur
	}
	t.Fatal("the store never settled after an accepted call")
}

// busy reports whether a sandbox, snapshot or session is on its way
// somewhere.
func (e *Env) busy(t *testing.T) bool {
	t.Helper()
	ctx := context.Background()
	sbs, _, err := e.Store.ListSandboxes(ctx, store.ListOptions{IncludeDeleted: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, sb := range sbs {
		switch sb.State {
		case sandbox.StateCreating, sandbox.StateStarting, sandbox.StateStopping,
			sandbox.StateArchiving, sandbox.StateRestoring, sandbox.StateDeleting:
			return true
		}
	}
	snaps, err := e.Store.ListSnapshots(ctx, store.SnapshotFilter{})
	if err != nil {
		t.Fatal(err)
	}
	for _, sn := range snaps {
		if sn.State == sandbox.SnapshotCreating {
			return true
		}
	}
	ses, err := e.Store.SessionsInStatuses(ctx, store.SessionProvisioning, store.SessionStopping)
	if err != nil {
		t.Fatal(err)
	}
	return len(ses) > 0
}

// Running reports whether sandbox id is running (a fuzz target's fixture
// sandbox may have been killed, archived or restored by an accepted
// input).
func (e *Env) Running(t *testing.T, id string) bool {
	t.Helper()
	sb, err := e.Store.GetSandbox(context.Background(), "", id)
	if err != nil {
		t.Fatal(err)
	}
	return sb.State == sandbox.StateRunning
}
