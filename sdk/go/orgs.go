package platinum

import (
	"context"
	"fmt"
	"time"
)

// Org is an organization: the unit that owns sandboxes and tokens.
type Org struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// OrgsService groups the organization calls. Get it from Client.Orgs.
type OrgsService struct {
	c *Client
}

// Create makes an organization and returns it with its first API token
// ("pt_…"), which is shown only this once. It needs the admin token; any
// other gives an APIError with code forbidden.
func (s *OrgsService) Create(ctx context.Context, name string) (*Org, string, error) {
	var out struct {
		Org   Org    `json:"org"`
		Token string `json:"token"`
	}
	in := map[string]string{"name": name}
	if _, err := s.c.doJSON(ctx, "POST", "/v1/orgs", nil, in, &out); err != nil {
		return nil, "", fmt.Errorf("create org %q: %w", name, err)
	}
	return &out.Org, out.Token, nil
}
