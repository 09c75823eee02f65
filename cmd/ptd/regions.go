package main

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/platinum-dev/platinum/internal/region"
)

// regionPeers is the repeatable --region-peer NAME=URL flag: the other
// regions, each with its own store, and the URL of any ptd of each
// (docs/ARCHITECTURE.md, "Regions").
type regionPeers []region.Peer

func (p *regionPeers) String() string {
	var out []string
	for _, r := range *p {
		out = append(out, r.Name+"="+r.URL.String())
	}
	return strings.Join(out, ",")
}

// Set parses NAME=URL, URL an http or https URL of a ptd's API.
func (p *regionPeers) Set(v string) error {
	name, raw, ok := strings.Cut(v, "=")
	if !ok || name == "" {
		return fmt.Errorf("want NAME=URL, got %q", v)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("region %s: URL %q must be http(s)://HOST[:PORT] of a ptd of that region", name, raw)
	}
	for _, r := range *p {
		if r.Name == name {
			return fmt.Errorf("region %s is given twice", name)
		}
	}
	*p = append(*p, region.Peer{Name: name, URL: u})
	return nil
}

// validateRegions checks the peers against this ptd's own region.
func validateRegions(self string, peers regionPeers) error {
	if len(peers) == 0 {
		return nil
	}
	if self == "" {
		return fmt.Errorf("--region-peer needs this ptd's own --region")
	}
	for _, p := range peers {
		if p.Name == self {
			return fmt.Errorf("--region-peer %s names this ptd's own region", p.Name)
		}
	}
	return nil
}

// regionNames is this ptd's region, then its peers'.
func regionNames(self string, peers regionPeers) []string {
	if self == "" {
		return nil
	}
	out := []string{self}
	for _, p := range peers {
		out = append(out, p.Name)
	}
	return out
}
