package remote

import (
	"encoding/json"
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/platinum-dev/platinum/internal/sandbox"
	"github.com/platinum-dev/platinum/internal/store"
)

// roundTrip sends v through the wire codec as a value of type T.
func roundTrip[T any](t *testing.T, v T) T {
	t.Helper()
	tree, err := encode(reflect.ValueOf(&v).Elem())
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(tree)
	if err != nil {
		t.Fatal(err)
	}
	var out T
	if err := decode(b, reflect.ValueOf(&out).Elem()); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return out
}

func TestCodecRoundTrip(t *testing.T) {
	at := time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.UTC)
	tests := []struct {
		name string
		in   any
		out  func(t *testing.T, in any) any
	}{
		{"sandbox with json:\"-\" fields", sandbox.Sandbox{
			ID: "sbx_1", Env: map[string]string{"A": "1"}, Metadata: map[string]string{}, Version: 7,
			AgentToken: "secret", SSHKeys: []string{}, Preview: &sandbox.Preview{Public: []int{}, Gen: map[int]int64{8080: 3}},
			CreatedAt: at, DeletedAt: &at, Secrets: map[string]sandbox.Secret{},
		}, func(t *testing.T, in any) any { return roundTrip(t, in.(sandbox.Sandbox)) }},
		{"nil maps and slices stay nil", sandbox.Sandbox{ID: "sbx_2"},
			func(t *testing.T, in any) any { return roundTrip(t, in.(sandbox.Sandbox)) }},
		{"raw documents and bytes", store.HostRecord{ID: "h1", Capacity: json.RawMessage(`{"cpu":4}`), Status: nil},
			func(t *testing.T, in any) any { return roundTrip(t, in.(store.HostRecord)) }},
		{"empty bytes stay empty", store.IdempotencyRecord{Body: []byte{}, Header: map[string][]string{"A": {"b"}}},
			func(t *testing.T, in any) any { return roundTrip(t, in.(store.IdempotencyRecord)) }},
		{"slice of records", []store.Lease{{Name: "a", ExpiresAt: at}, {Name: "b"}},
			func(t *testing.T, in any) any { return roundTrip(t, in.([]store.Lease)) }},
		{"map of records", map[string]store.Usage{"h1": {Sandboxes: 2, CPU: 1.5}},
			func(t *testing.T, in any) any { return roundTrip(t, in.(map[string]store.Usage)) }},
		{"duration", 90 * time.Second, func(t *testing.T, in any) any { return roundTrip(t, in.(time.Duration)) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.out(t, tc.in)
			if diff := cmp.Diff(tc.in, got); diff != "" {
				t.Errorf("round trip (-in +out):\n%s", diff)
			}
			// cmp.Diff equates nothing it is not told to: check nil-ness too.
			if !reflect.DeepEqual(tc.in, got) {
				t.Errorf("round trip: %#v, want %#v", got, tc.in)
			}
		})
	}
}

func TestCodecTimesStayUTC(t *testing.T) {
	at := time.Date(2025, 3, 4, 5, 6, 7, 123456000, time.UTC)
	got := roundTrip(t, at)
	if got.Location() != time.UTC || !got.Equal(at) {
		t.Fatalf("%v came back as %v (%v)", at, got, got.Location())
	}
}

func TestCodecInterfaces(t *testing.T) {
	// An `any` travels as the JSON encoding/json writes (tags honoured).
	ch := store.StateChange{From: sandbox.StateRunning, To: sandbox.StateStopped}
	v := reflect.New(reflect.TypeFor[any]()).Elem()
	v.Set(reflect.ValueOf(ch))
	tree, err := encode(v)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(tree)
	var got any
	if err := decode(b, reflect.ValueOf(&got).Elem()); err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(ch)
	if raw, ok := got.(json.RawMessage); !ok || string(raw) != string(want) {
		t.Fatalf("any came back as %#v, want %s", got, want)
	}
	// An error travels as its message; nil as nil.
	if e := roundTrip[error](t, errors.New("boom")); e == nil || e.Error() != "boom" {
		t.Fatalf("error came back as %v", e)
	}
	if e := roundTrip[error](t, nil); e != nil {
		t.Fatalf("nil error came back as %v", e)
	}
	if a := roundTrip[any](t, nil); a != nil {
		t.Fatalf("nil any came back as %#v", a)
	}
}
