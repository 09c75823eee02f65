package main

import (
	"errors"
	"strings"
	"testing"
)

// TestArgChecks pins the usage errors the shared argument checks give, which
// many verbs print word for word.
func TestArgChecks(t *testing.T) {
	t.Parallel()
	failing := func(*input) error { return errors.New("own check") }
	for _, tt := range []struct {
		name  string
		check argCheck
		pos   []string
		want  string // "" for no error
	}{
		{"none given none wanted", noArgs, nil, ""},
		{"one given none wanted", noArgs, []string{"x"}, `unexpected argument "x"`},
		{"exact", exactArgs(2, "want two"), []string{"a", "b"}, ""},
		{"too few", exactArgs(2, "want two"), []string{"a"}, "want two"},
		{"too many", exactArgs(1, "want one"), []string{"a", "b"}, "want one"},
		{"message with a percent", exactArgs(1, "want 100% one"), nil, "want 100% one"},
		{"name", oneName("want a NAME"), []string{"n"}, ""},
		{"empty name", oneName("want a NAME"), []string{""}, "want a NAME"},
		{"some", someArgs("want IDs"), []string{"a", "b"}, ""},
		{"none for some", someArgs("want IDs"), nil, "want IDs"},
		{"count before own check", checks(oneSandboxID, failing), nil, "want exactly one sandbox ID"},
		{"own check after count", checks(oneSandboxID, failing), []string{"sbx"}, "own check"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.check(&input{pos: tt.pos, usage: "usage: pt x\n"})
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("error %q, want %q", got, tt.want)
			}
		})
	}
}

// TestWriteTable checks the shared table: header, then one aligned line of
// cells per row.
func TestWriteTable(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	rows := []struct{ a, b string }{{"x", "1"}, {"longer", "2"}}
	if err := writeTable(table(&b), "A\tB", rows, func(r *struct{ a, b string }) []string { return []string{r.a, r.b} }); err != nil {
		t.Fatal(err)
	}
	if want := "A        B\nx        1\nlonger   2\n"; b.String() != want {
		t.Errorf("table %q, want %q", b.String(), want)
	}
}
