package platinum

import (
	"encoding/json"
	"time"
)

// TimeFormat is the API's timestamp layout: UTC ISO 8601 with six
// fractional digits. The SDK's types marshal their times in it (rather than
// Go's default, which drops trailing zeros), so re-encoded records read
// exactly like the API's and keep their sort order as strings.
const TimeFormat = "2006-01-02T15:04:05.000000Z"

// apiTime formats t in TimeFormat; nil for the zero time.
func apiTime(t time.Time) *string {
	if t.IsZero() {
		return nil
	}
	s := t.UTC().Format(TimeFormat)
	return &s
}

// MarshalJSON encodes the sandbox in the API's shape and time format.
func (s Sandbox) MarshalJSON() ([]byte, error) {
	type plain Sandbox
	var deleted, expires *string
	if s.DeletedAt != nil {
		deleted = apiTime(*s.DeletedAt)
	}
	if s.ExpiresAt != nil {
		expires = apiTime(*s.ExpiresAt)
	}
	return json.Marshal(struct {
		plain
		CreatedAt *string `json:"created_at"`
		UpdatedAt *string `json:"updated_at"`
		DeletedAt *string `json:"deleted_at,omitempty"`
		ExpiresAt *string `json:"expires_at,omitempty"`
	}{plain(s), apiTime(s.CreatedAt), apiTime(s.UpdatedAt), deleted, expires})
}

// MarshalJSON encodes the template in the API's shape and time format.
func (t Template) MarshalJSON() ([]byte, error) {
	type plain Template
	return json.Marshal(struct {
		plain
		CreatedAt *string `json:"created_at,omitempty"`
	}{plain(t), apiTime(t.CreatedAt)})
}

// MarshalJSON encodes the entry in the API's shape and time format.
func (e FileEntry) MarshalJSON() ([]byte, error) {
	type plain FileEntry
	return json.Marshal(struct {
		plain
		ModifiedAt *string `json:"modified_at"`
	}{plain(e), apiTime(e.ModifiedAt)})
}

// MarshalJSON encodes the org in the API's shape and time format.
func (o Org) MarshalJSON() ([]byte, error) {
	type plain Org
	return json.Marshal(struct {
		plain
		CreatedAt *string `json:"created_at"`
	}{plain(o), apiTime(o.CreatedAt)})
}

// MarshalJSON encodes the metrics in the API's shape and time format.
func (m Metrics) MarshalJSON() ([]byte, error) {
	type plain Metrics
	return json.Marshal(struct {
		plain
		At *string `json:"at"`
	}{plain(m), apiTime(m.At)})
}

// MarshalJSON encodes the usage in the API's shape and time format.
func (u Usage) MarshalJSON() ([]byte, error) {
	type plain Usage
	return json.Marshal(struct {
		plain
		From *string `json:"from"`
		To   *string `json:"to"`
	}{plain(u), apiTime(u.From), apiTime(u.To)})
}

// MarshalJSON encodes the period in the API's shape and time format.
func (p UsagePeriod) MarshalJSON() ([]byte, error) {
	type plain UsagePeriod
	return json.Marshal(struct {
		plain
		From *string `json:"from"`
		To   *string `json:"to"`
	}{plain(p), apiTime(p.From), apiTime(p.To)})
}
