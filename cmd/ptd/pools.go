package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/platinum-dev/platinum/internal/sessions"
)

// poolFlags is the repeatable --warm-pool TEMPLATE=MIN_READY[:MAX] flag:
// the warm-pool defaults that PUT /v1/pools/{template} overrides.
type poolFlags map[string]sessions.PoolSize

func (p poolFlags) String() string {
	var out []string
	for tpl, sz := range p {
		out = append(out, fmt.Sprintf("%s=%d:%d", tpl, sz.MinReady, sz.Max))
	}
	sort.Strings(out)
	return strings.Join(out, ",")
}

// Set parses TEMPLATE=MIN_READY[:MAX]; MAX defaults to MIN_READY.
func (p poolFlags) Set(v string) error {
	tpl, size, ok := strings.Cut(v, "=")
	if !ok || tpl == "" {
		return fmt.Errorf("want TEMPLATE=MIN_READY[:MAX], got %q", v)
	}
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
	p[tpl] = sessions.PoolSize{MinReady: minReady, Max: mx}
	return nil
}
