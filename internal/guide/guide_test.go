package guide

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestExamplesAndCommands(t *testing.T) {
	dir := t.TempDir()
	page := "# Page\n\n```sh tested:two\ncurl -X POST x \\\n  -d '{}'\n# {\"answer\": 1}\necho done\n```\n\n" +
		"```sh\nnot tested\n```\n\n```json\n{}\n```\n\n```sh tested:one\npt sandbox list\n```\n"
	if err := os.WriteFile(filepath.Join(dir, "page.md"), []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	ex, err := Examples(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"page.md#one", "page.md#two"}, Names(ex)); diff != "" {
		t.Fatalf("names (-want +got):\n%s", diff)
	}
	want := []string{"curl -X POST x \\\n  -d '{}'", "echo done"}
	if diff := cmp.Diff(want, Commands(ex["page.md#two"])); diff != "" {
		t.Errorf("commands (-want +got):\n%s", diff)
	}
}

func TestExampleNamedTwiceIsAnError(t *testing.T) {
	dir := t.TempDir()
	page := "```sh tested:a\none\n```\n```sh tested:a\ntwo\n```\n"
	if err := os.WriteFile(filepath.Join(dir, "page.md"), []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Examples(dir); err == nil {
		t.Fatal("Examples accepted two examples named a")
	}
}
