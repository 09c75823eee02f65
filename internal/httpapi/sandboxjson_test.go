package httpapi

import (
	"bytes"
	"encoding/json"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"
)

// TestSandboxViewJSON: sandboxView's own encoding is encoding/json's,
// byte for byte, for views with every field (embedded ones included)
// randomly zero, nil, empty or set, strings drawn from characters JSON
// escapes (HTML, controls, U+2028, invalid UTF-8). A field added to
// sandboxView but not to appendJSON fails here.
func TestSandboxViewJSON(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		var v sandboxView
		fillRandom(rng, reflect.ValueOf(&v).Elem())
		var want bytes.Buffer
		if err := json.NewEncoder(&want).Encode(v); err != nil {
			t.Fatal(err)
		}
		got, ok := v.appendJSON(nil)
		if !ok {
			t.Fatalf("view %d: appendJSON refused a view encoding/json writes: %s", i, want.Bytes())
		}
		got = append(got, '\n')
		if !bytes.Equal(got, want.Bytes()) {
			t.Fatalf("view %d:\n got %s\nwant %s", i, got, want.Bytes())
		}
	}
}

// TestAppendJSONFloat: cpu values encoding/json writes without an exponent
// are written the same; the others are refused, so writeJSON falls back.
func TestAppendJSONFloat(t *testing.T) {
	for _, f := range []float64{0, math.Copysign(0, -1), 0.25, 1, 1.5, 2, 16, 0.1, 1e-6, 123456789.125, 1e20, -3.75} {
		want, _ := json.Marshal(f)
		got, ok := appendJSONFloat(nil, f)
		if !ok || string(got) != string(want) {
			t.Errorf("%v: got %s (%v), want %s", f, got, ok, want)
		}
	}
	for _, f := range []float64{1e-7, 1e21, -1e22, math.Inf(1), math.NaN()} {
		if _, ok := appendJSONFloat(nil, f); ok {
			t.Errorf("%v: not refused", f)
		}
	}
}

// randomRunes are what random strings are made of: plain text and every
// kind of character JSON encoding treats specially.
var randomRunes = []string{"a", "Z", "0", " ", "_", "-", ".", "/", ":", "\"", "\\", "<", ">", "&", "\n", "\r", "\t",
	"\b", "\f", "\x00", "\x01", "\x1f", "\x7f", "é", "日本", "\u2028", "\u2029", "\xff", "\xe2\x80", "😀", "'", "+"}

func randomString(rng *rand.Rand) string {
	if rng.IntN(4) == 0 {
		return ""
	}
	var b bytes.Buffer
	for range rng.IntN(12) + 1 {
		b.WriteString(randomRunes[rng.IntN(len(randomRunes))])
	}
	return b.String()
}

// fillRandom sets v, and every field it has, to a random value of its
// type, often the zero value (so omitempty and null paths are taken).
func fillRandom(rng *rand.Rand, v reflect.Value) {
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() || v.Type().Field(i).Anonymous {
				fillRandom(rng, v.Field(i))
			}
		}
		return
	}
	if rng.IntN(3) == 0 {
		v.SetZero()
		return
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(randomString(rng))
	case reflect.Bool:
		v.SetBool(rng.IntN(2) == 0)
	case reflect.Int, reflect.Int64:
		v.SetInt(rng.Int64N(1<<40) - 1<<39)
	case reflect.Float64:
		fs := []float64{0.25, 0.5, 1, 1.5, 2, 4, 8, 0.1, 3.3333333333333335, 1e-6, 123456.789}
		v.SetFloat(fs[rng.IntN(len(fs))])
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fillRandom(rng, p.Elem())
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), rng.IntN(4), rng.IntN(4)+4)
		for i := range s.Len() {
			fillRandom(rng, s.Index(i))
		}
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		for range rng.IntN(5) {
			k := reflect.New(v.Type().Key()).Elem()
			fillRandom(rng, k)
			e := reflect.New(v.Type().Elem()).Elem()
			fillRandom(rng, e)
			m.SetMapIndex(k, e)
		}
		v.Set(m)
	default:
		panic("fillRandom: no case for " + v.Type().String())
	}
}
