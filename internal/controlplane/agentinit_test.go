package controlplane

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// TestAgentInitAtBoot: a cold boot's spec carries the sandbox's init (its
// environment, /etc/pt-env, the template's working directory) unless the
// template names a user; a start whose host says the agent started with it
// makes no init call into the sandbox, any other start makes it (POST
// /init and the /etc/pt-env upload).
func TestAgentInitAtBoot(t *testing.T) {
	s, _ := newTestService(t, &fakeHost{})
	s.noAgentInit = false
	sb := sandbox.Sandbox{ID: "sbx_init", AgentToken: "tok", Env: map[string]string{"A": "it's"}}

	in := s.agentInit(sb, store.TemplateSettings{Workdir: "/w"})
	if in == nil || in.Env["A"] != "it's" || in.Workdir != "/w" || in.Files["/etc/pt-env"] != envFile(sb.Env) {
		t.Fatalf("boot init %+v", in)
	}
	if in := s.agentInit(sb, store.TemplateSettings{User: "app"}); in != nil {
		t.Errorf("a template naming a user: boot init %+v, want the /init call", in)
	}

	// An agent stand-in on a loopback address of its own, at AgentPort.
	addr := fmt.Sprintf("127.%d.%d.%d", 100+rand.IntN(100), rand.IntN(250)+1, rand.IntN(250)+1)
	ln, err := net.Listen("tcp", net.JoinHostPort(addr, strconv.Itoa(AgentPort)))
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var calls []string
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if r.URL.Path != "/health" { // the connection opened ahead of the first call
			calls = append(calls, r.Method+" "+r.URL.Path+"?"+r.URL.Query().Get("path"))
		}
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	ctx := context.Background()
	if err := s.initAgent(ctx, sb, Instance{Address: addr, Initialized: true}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if len(calls) != 0 {
		t.Errorf("an agent started initialised was called: %v", calls)
	}
	mu.Unlock()
	if err := s.initAgent(ctx, sb, Instance{Address: addr}); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(calls)
	if strings.Join(calls, ",") != "POST /files?/etc/pt-env,POST /init?" {
		t.Errorf("calls into an agent not started initialised: %v, want the init and the /etc/pt-env upload", calls)
	}
}
