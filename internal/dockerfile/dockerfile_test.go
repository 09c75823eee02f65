package dockerfile

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/internal/sandbox"
)

func TestParseRefuses(t *testing.T) {
	for _, tc := range []struct {
		name, text  string
		line        int
		unsupported bool
	}{
		{"unknown instruction", "FROM busybox\nFROOB x\n", 2, false},
		{"no FROM", "RUN true\n", 1, false},
		{"empty", "# nothing\n", 1, false},
		{"multi-stage", "FROM busybox AS a\nRUN true\nFROM busybox\n", 3, true},
		{"COPY --from", "FROM busybox\nCOPY --from=a /x /y\n", 2, true},
		{"COPY --link", "FROM busybox\nCOPY --link a /b\n", 2, true},
		{"ADD URL", "FROM busybox\n\nADD https://example.com/x /x\n", 3, true},
		{"RUN --mount", "FROM busybox\nRUN --mount=type=cache,target=/c true\n", 2, true},
		{"RUN --network", "FROM busybox\nRUN --network=none true\n", 2, true},
		{"HEALTHCHECK", "FROM busybox\nHEALTHCHECK CMD true\n", 2, true},
		{"ONBUILD", "FROM busybox\nONBUILD RUN true\n", 2, true},
		{"VOLUME", "FROM busybox\nVOLUME /data\n", 2, true},
		{"STOPSIGNAL", "FROM busybox\nSTOPSIGNAL SIGKILL\n", 2, true},
		{"heredoc", "FROM busybox\nRUN <<EOF\necho hi\nEOF\n", 2, true},
		{"bad chmod", "FROM busybox\nCOPY --chmod=rwx a /b\n", 2, false},
		{"other platform", "FROM --platform=linux/arm64 busybox\n", 1, true},
		{"ENV without value", "FROM busybox\nENV\n", 2, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.text)
			var de *Error
			if !errors.As(err, &de) {
				t.Fatalf("Parse = %v, want *Error", err)
			}
			if de.Line != tc.line || de.Unsupported != tc.unsupported {
				t.Errorf("error %q: line %d unsupported %v, want line %d unsupported %v", de, de.Line, de.Unsupported, tc.line, tc.unsupported)
			}
			if !errors.Is(err, sandbox.ErrInvalidArgument) {
				t.Error("not an invalid argument")
			}
		})
	}
}

func TestPlan(t *testing.T) {
	f, err := Parse(`ARG BASE=busybox
FROM ${BASE}
ARG VERSION=1
ARG EXTRA
ENV APP_HOME=/srv/app PATH=/opt/bin:$PATH
WORKDIR $APP_HOME
COPY --chown=user:user app.txt ./
COPY --chmod=0755 bin/* /opt/bin/
ADD data.tar.gz /data
RUN echo "v$VERSION $EXTRA" > version
RUN ["/bin/sh", "-c", "echo exec"]
SHELL ["/bin/sh", "-ec"]
RUN set -x; true
USER user
LABEL org.example.v=$VERSION
EXPOSE 8080 9000/udp
ENTRYPOINT ["/opt/bin/serve"]
CMD ["--port", "8080"]
`)
	if err != nil {
		t.Fatal(err)
	}
	p, err := f.Plan(State{Env: []string{"PATH=/usr/bin:/bin"}, Workdir: "/"}, map[string]string{"VERSION": "2", "NOPE": "x"})
	if err != nil {
		t.Fatal(err)
	}
	if p.From != "busybox" || p.FromLine != 2 {
		t.Errorf("from = %q line %d", p.From, p.FromLine)
	}
	if diff := cmp.Diff([]string{"NOPE"}, p.UnusedArgs); diff != "" {
		t.Errorf("unused args (-want +got):\n%s", diff)
	}
	byLine := map[int]Step{}
	for _, s := range p.Steps {
		byLine[s.Line] = s
	}
	if s := byLine[7]; s.Kind != Copy || s.Dest != "/srv/app/" || s.Chown != "user:user" {
		t.Errorf("COPY: %+v", s)
	}
	if s := byLine[8]; s.Chmod != "0755" || s.Dest != "/opt/bin/" || s.Sources[0] != "bin/*" {
		t.Errorf("COPY --chmod: %+v", s)
	}
	run := byLine[10]
	if diff := cmp.Diff([]string{"/bin/sh", "-c", `echo "v$VERSION $EXTRA" > version`}, run.Argv); diff != "" {
		t.Errorf("RUN argv (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"PATH=/opt/bin:/usr/bin:/bin", "APP_HOME=/srv/app", "VERSION=2"}, run.State.RunEnv()); diff != "" {
		t.Errorf("RUN env (-want +got):\n%s", diff)
	}
	if run.State.Workdir != "/srv/app" || run.State.User != "" {
		t.Errorf("RUN state: %+v", run.State)
	}
	if diff := cmp.Diff([]string{"/bin/sh", "-c", "echo exec"}, byLine[11].Argv); diff != "" {
		t.Errorf("exec form (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"/bin/sh", "-ec", "set -x; true"}, byLine[13].Argv); diff != "" {
		t.Errorf("SHELL applies (-want +got):\n%s", diff)
	}
	want := State{
		Env: []string{"PATH=/opt/bin:/usr/bin:/bin", "APP_HOME=/srv/app"}, User: "user", Workdir: "/srv/app",
		Shell: []string{"/bin/sh", "-ec"}, Entrypoint: []string{"/opt/bin/serve"}, Cmd: []string{"--port", "8080"},
		Labels: map[string]string{"org.example.v": "2"}, Ports: []string{"8080/tcp", "9000/udp"},
	}
	if diff := cmp.Diff(want, p.Final); diff != "" {
		t.Errorf("final state (-want +got):\n%s", diff)
	}
	for _, s := range p.Steps {
		if s.ChangesFiles() != (s.Kind == Run || s.Kind == Copy || s.Kind == Add || s.Kind == Workdir) {
			t.Errorf("%s ChangesFiles = %v", s.Kind, s.ChangesFiles())
		}
	}
	// The same file and arguments give the same keys; another argument
	// value changes the RUN's key.
	p2, _ := f.Plan(State{Env: []string{"PATH=/usr/bin:/bin"}, Workdir: "/"}, map[string]string{"VERSION": "2", "NOPE": "x"})
	p3, _ := f.Plan(State{Env: []string{"PATH=/usr/bin:/bin"}, Workdir: "/"}, map[string]string{"VERSION": "3"})
	if p2.Steps[5].Key() != p.Steps[5].Key() {
		t.Error("keys are not stable")
	}
	if p3.Steps[8].Key() == p.Steps[8].Key() {
		t.Errorf("step %q: another build arg gave the same key", p.Steps[8].Text)
	}
}

func TestPlanExpansionErrorNamesLine(t *testing.T) {
	f, err := Parse("FROM busybox\nENV A=1\nWORKDIR ${A:?needs A}${B:?needs B}\n")
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.Plan(State{}, nil)
	var de *Error
	if !errors.As(err, &de) || de.Line != 3 {
		t.Fatalf("Plan = %v, want an error on line 3", err)
	}
}
