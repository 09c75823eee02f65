package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/platinum-dev/platinum/internal/sessions"
)

// poolFlags is the repeatable --warm-pool
// TEMPLATE[@CLASS]=MIN_READY[:MAX[:auto]] flag: the warm-pool defaults that
// PUT /v1/pools/{template} overrides, keyed TEMPLATE[@CLASS]
// (sessions.Config.Pools); without a class the pool holds the default
// runtime class; ":auto" sizes it from demand between MIN_READY and MAX
// (docs/sessions.md, "Demand-sized pools").
type poolFlags map[string]sessions.PoolSize

func (p poolFlags) String() string {
	var out []string
	for tpl, sz := range p {
		v := fmt.Sprintf("%s=%d:%d", tpl, sz.MinReady, sz.Max)
		if sz.Auto {
			v += ":auto"
		}
		out = append(out, v)
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// Set parses TEMPLATE[@CLASS]=MIN_READY[:MAX[:auto]]; MAX defaults to
// MIN_READY, and an auto pool needs a MAX above it (its target moves
// between the two).
// Whether CLASS runs on this host is checked once the host is known
// (sessions, at each refill).
func (p poolFlags) Set(v string) error {
	tpl, size, ok := strings.Cut(v, "=")
	name, class, hasClass := strings.Cut(tpl, "@")
	if !ok || name == "" || (hasClass && class == "") {
		return fmt.Errorf("want TEMPLATE[@CLASS]=MIN_READY[:MAX[:auto]], got %q", v)
	}
	size, auto := strings.CutSuffix(size, ":auto")
	minS, maxS, hasMax := strings.Cut(size, ":")
	minReady, err := strconv.Atoi(minS)
	if err != nil || minReady < 0 {
		return fmt.Errorf("min_ready of %q must be a non-negative integer", v)
	}
	mx := minReady
	if hasMax {
		if mx, err = strconv.Atoi(maxS); err != nil || mx < minReady {
			return fmt.Errorf("max of %q must be an integer >= min_ready", v)
		}
	}
	if auto && mx <= minReady {
		return fmt.Errorf("the auto pool %q needs a MAX above MIN_READY: its target moves between the two", v)
	}
	p[tpl] = sessions.PoolSize{MinReady: minReady, Max: mx, Auto: auto}
	return nil
}
