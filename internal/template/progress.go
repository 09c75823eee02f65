package template

import (
	"strings"
)

// debootstrapProgress turns debootstrap's "I: …" lines into rough
// percentages. debootstrap does not announce how many packages it will
// fetch, so each stage advances against an expected count measured for
// bookworm minbase (≈100 packages) and stops at the stage's ceiling.
type debootstrapProgress struct {
	pct    int
	counts map[string]int
}

// expectedPackages is roughly how many packages bookworm minbase plus
// procps and ca-certificates retrieves, unpacks and configures.
const expectedPackages = 100

// stage percent ranges: [start, end) per debootstrap phase.
var stages = map[string][2]int{
	"Retrieving":  {5, 45},
	"Extracting":  {45, 55},
	"Unpacking":   {55, 72},
	"Configuring": {72, 94},
}

// parse returns the percentage and message for a debootstrap output line,
// or ok=false for lines worth no update.
func (p *debootstrapProgress) parse(line string) (pct int, msg string, ok bool) {
	rest, found := strings.CutPrefix(line, "I: ")
	if !found {
		if strings.HasPrefix(line, "W: ") || strings.HasPrefix(line, "E: ") {
			return p.pct, line, true
		}
		return 0, "", false
	}
	verb, arg, _ := strings.Cut(rest, " ")
	arg = strings.TrimSuffix(arg, "...")
	switch {
	case verb == "Retrieving" && (arg == "InRelease" || arg == "Release" || arg == "Packages"):
		return p.set(1, "fetching package lists")
	case verb == "Resolving":
		return p.set(3, "resolving dependencies")
	case verb == "Base" && strings.HasPrefix(arg, "system installed"):
		return p.set(95, "base system installed")
	case verb == "Installing" || (verb == "Unpacking" && strings.HasPrefix(arg, "required")) ||
		(verb == "Unpacking" && strings.HasPrefix(arg, "the base")) ||
		(verb == "Configuring" && (strings.HasPrefix(arg, "required") || strings.HasPrefix(arg, "the base"))):
		return 0, "", false
	}
	r, known := stages[verb]
	if !known {
		return 0, "", false
	}
	if p.counts == nil {
		p.counts = map[string]int{}
	}
	p.counts[verb]++
	n := p.counts[verb]
	if n > expectedPackages {
		n = expectedPackages
	}
	pkg, _, _ := strings.Cut(arg, " ")
	pkg, _, _ = strings.Cut(pkg, ":")
	return p.set(r[0]+(r[1]-r[0])*n/expectedPackages, strings.ToLower(verb)+" "+pkg)
}

func (p *debootstrapProgress) set(pct int, msg string) (int, string, bool) {
	if pct > p.pct {
		p.pct = pct
	}
	return p.pct, msg, true
}
