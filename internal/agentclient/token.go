package agentclient

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
)

// SetAccessToken makes the agent require token from now on (POST /init
// with accessToken), leaving its environment alone. The client must still
// hold the current token. A sandbox restored from another's memory image
// (a clone or fork) has the source's token in memory: the host re-keys it
// before anyone else talks to it.
func (c *Client) SetAccessToken(ctx context.Context, token string) error {
	body, err := json.Marshal(map[string]any{"accessToken": token})
	if err != nil {
		return fmt.Errorf("agent set token: %w", err)
	}
	resp, err := c.do(ctx, http.MethodPost, "/init", nil, "application/json", bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("agent set token: %w", err)
	}
	drain(resp.Body)
	return nil
}
