package httpapi

import (
	"fmt"
	"net/url"
)

// The product documents show some request fields in their SDKs' camelCase
// (ttlMs, templateVersionId, projectId, workflowId, …) where the REST API
// uses snake_case. Both spellings are accepted; giving both with different
// values is invalid_request naming the two, so a client never has one of
// them silently ignored.

// aliasString returns whichever of snake and camel is set ("" is unset).
func aliasString(snake, camel, snakeName, camelName string) (string, error) {
	if snake != "" && camel != "" && snake != camel {
		return "", aliasConflict(snakeName, camelName)
	}
	if snake != "" {
		return snake, nil
	}
	return camel, nil
}

// aliasPtr returns whichever of snake and camel is set (nil is unset).
func aliasPtr[T comparable](snake, camel *T, snakeName, camelName string) (*T, error) {
	if snake != nil && camel != nil && *snake != *camel {
		return nil, aliasConflict(snakeName, camelName)
	}
	if snake != nil {
		return snake, nil
	}
	return camel, nil
}

// aliasQuery reads a query parameter under either spelling.
func aliasQuery(q url.Values, snakeName, camelName string) (string, error) {
	return aliasString(q.Get(snakeName), q.Get(camelName), snakeName, camelName)
}

func aliasConflict(snakeName, camelName string) error {
	return badRequest(fmt.Sprintf("%s and %s are the same field under two spellings and differ; send one", snakeName, camelName), snakeName)
}
