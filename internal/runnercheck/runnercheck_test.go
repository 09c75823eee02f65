package runnercheck

import (
	"os/exec"
	"testing"
)

func TestPytest(t *testing.T) {
	for _, tc := range []struct {
		name, out string
		ok        bool
	}{
		{"all passed", "test_a.py::test_x PASSED\n======================== 9 passed in 12.34s ========================\n", true},
		{"passed with a duration", "=== 3 passed in 75.02s (0:01:15) ===\n", true},
		{"a skip", "=========== 8 passed, 1 skipped in 3.10s ===========\n", false},
		{"a failure", "=========== 1 failed, 8 passed in 3.10s ===========\n", false},
		{"an error", "=========== 8 passed, 1 error in 3.10s ===========\n", false},
		{"deselected", "=========== 8 passed, 2 deselected in 3.10s ===========\n", false},
		{"xfailed", "=========== 8 passed, 1 xfailed in 3.10s ===========\n", false},
		{"nothing ran", "============ no tests ran in 0.01s ============\n", false},
		{"all skipped", "============ 4 skipped in 0.01s ============\n", false},
		{"no summary", "Traceback (most recent call last):\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := Pytest(tc.out); (err == nil) != tc.ok {
				t.Errorf("Pytest(%q) = %v, want ok %v", tc.out, err, tc.ok)
			}
		})
	}
}

func TestNodeTest(t *testing.T) {
	summary := func(tests, pass, fail, cancelled, skipped, todo string) string {
		return "✔ a (1ms)\nℹ tests " + tests + "\nℹ suites 0\nℹ pass " + pass + "\nℹ fail " + fail + "\nℹ cancelled " + cancelled +
			"\nℹ skipped " + skipped + "\nℹ todo " + todo + "\nℹ duration_ms 5\n"
	}
	for _, tc := range []struct {
		name, out string
		ok        bool
	}{
		{"all passed", summary("11", "11", "0", "0", "0", "0"), true},
		{"a failure", summary("11", "10", "1", "0", "0", "0"), false},
		{"a skip", summary("11", "10", "0", "0", "1", "0"), false},
		{"cancelled", summary("11", "10", "0", "1", "0", "0"), false},
		{"todo", summary("11", "10", "0", "0", "0", "1"), false},
		{"no tests", summary("0", "0", "0", "0", "0", "0"), false},
		{"no summary", "SyntaxError: Unexpected token\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := NodeTest(tc.out); (err == nil) != tc.ok {
				t.Errorf("NodeTest(%q) = %v, want ok %v", tc.out, err, tc.ok)
			}
		})
	}
}

func TestRun(t *testing.T) {
	// A passing run's output is read by check; a failing one never gets
	// here, since Run fails the test.
	Run(t, "pytest", exec.Command("sh", "-c", "echo '=== 2 passed in 0.10s ==='"), Pytest)
	Run(t, "sh", exec.Command("true"), nil)
}
