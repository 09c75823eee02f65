package remote

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"time"
)

// The wire codec writes a store value as JSON by Go field name, blind to
// json tags: the store's records carry tags for the public API, and many
// fields a store must keep (Sandbox.Env, Version, AgentToken, …) are
// json:"-" there. It keeps what the conventions in internal/store's package
// doc need compared with cmp.Diff: nil and empty maps, slices and byte
// slices stay apart, times keep their nanoseconds and UTC location. A zero
// field is left out (it decodes as zero), an unknown one is ignored, so a
// field added on one side only reads as its zero value on the other.

var (
	timeType  = reflect.TypeFor[time.Time]()
	errorType = reflect.TypeFor[error]()
)

// encode turns v into a tree encoding/json writes as the wire form.
func encode(v reflect.Value) (any, error) {
	if !v.IsValid() {
		return nil, nil
	}
	t := v.Type()
	if t == timeType {
		return v.Interface(), nil
	}
	switch t.Kind() {
	case reflect.Bool, reflect.String,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return v.Interface(), nil
	case reflect.Interface:
		if v.IsNil() {
			return nil, nil
		}
		if t == errorType {
			return v.Interface().(error).Error(), nil
		}
		// An `any` value (AddEvent's data) is what the store marshals
		// with encoding/json itself, so it travels as that JSON.
		b, err := json.Marshal(v.Interface())
		return json.RawMessage(b), err
	case reflect.Pointer:
		if v.IsNil() {
			return nil, nil
		}
		return encode(v.Elem())
	case reflect.Slice:
		if v.IsNil() {
			return nil, nil
		}
		if t.Elem().Kind() == reflect.Uint8 {
			return bytes.Clone(v.Bytes()), nil // base64; json.RawMessage included
		}
		fallthrough
	case reflect.Array:
		out := make([]any, v.Len())
		for i := range out {
			e, err := encode(v.Index(i))
			if err != nil {
				return nil, err
			}
			out[i] = e
		}
		return out, nil
	case reflect.Map:
		if v.IsNil() {
			return nil, nil
		}
		out := make(map[string]any, v.Len())
		for it := v.MapRange(); it.Next(); {
			k, err := mapKey(it.Key())
			if err != nil {
				return nil, err
			}
			e, err := encode(it.Value())
			if err != nil {
				return nil, err
			}
			out[k] = e
		}
		return out, nil
	case reflect.Struct:
		out := map[string]any{}
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() || v.Field(i).IsZero() {
				continue
			}
			e, err := encode(v.Field(i))
			if err != nil {
				return nil, fmt.Errorf("%s.%s: %w", t, f.Name, err)
			}
			out[f.Name] = e
		}
		return out, nil
	}
	return nil, fmt.Errorf("a %s cannot go over the wire", t)
}

func mapKey(k reflect.Value) (string, error) {
	switch k.Kind() {
	case reflect.String:
		return k.String(), nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return strconv.FormatInt(k.Int(), 10), nil
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return strconv.FormatUint(k.Uint(), 10), nil
	}
	return "", fmt.Errorf("a map key of type %s cannot go over the wire", k.Type())
}

var (
	unmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	null            = []byte("null")
)

// decode reads the wire form data into v, which must be settable.
func decode(data []byte, v reflect.Value) error {
	if t := v.Type(); t.Kind() == reflect.Interface && t.NumMethod() == 0 {
		// An argument of type any (AddEvent's data) keeps its JSON as
		// sent, key order included: the store writes it as it is.
		if bytes.Equal(bytes.TrimSpace(data), null) {
			v.SetZero()
		} else {
			v.Set(reflect.ValueOf(json.RawMessage(bytes.Clone(data))))
		}
		return nil
	}
	var tree any
	if err := readTree(bytes.NewReader(data), &tree); err != nil {
		return err
	}
	return fromTree(tree, v)
}

// readTree reads one JSON value into tree, numbers as json.Number: the
// JSON is scanned once, then fromTree sets values from the tree.
func readTree(r io.Reader, tree any) error {
	dec := json.NewDecoder(r)
	dec.UseNumber()
	return dec.Decode(tree)
}

// fromTree sets v, which must be settable, from a tree readTree read.
func fromTree(x any, v reflect.Value) error {
	t := v.Type()
	if x == nil {
		v.SetZero()
		return nil
	}
	bad := func() error { return fmt.Errorf("a %T for a %s", x, t) }
	if t == timeType {
		s, ok := x.(string)
		if !ok {
			return bad()
		}
		return v.Addr().Interface().(*time.Time).UnmarshalText([]byte(s))
	}
	switch t.Kind() {
	case reflect.Interface:
		if t == errorType {
			s, ok := x.(string)
			if !ok {
				return bad()
			}
			v.Set(reflect.ValueOf(errors.New(s)))
			return nil
		}
		if t.NumMethod() != 0 {
			return fmt.Errorf("a %s cannot come over the wire", t)
		}
		// An `any` inside a record (no store record has one) comes back
		// as its JSON with the keys sorted.
		b, err := json.Marshal(x) // json.Number keeps the number's text
		if err != nil {
			return err
		}
		v.Set(reflect.ValueOf(json.RawMessage(b)))
		return nil
	case reflect.Pointer:
		p := reflect.New(t.Elem())
		if err := fromTree(x, p.Elem()); err != nil {
			return err
		}
		v.Set(p)
		return nil
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			s, ok := x.(string)
			if !ok {
				return bad()
			}
			b, err := base64.StdEncoding.DecodeString(s)
			if err != nil {
				return err
			}
			v.SetBytes(b)
			return nil
		}
		items, ok := x.([]any)
		if !ok {
			return bad()
		}
		sl := reflect.MakeSlice(t, len(items), len(items))
		for i, it := range items {
			if err := fromTree(it, sl.Index(i)); err != nil {
				return err
			}
		}
		v.Set(sl)
		return nil
	case reflect.Array:
		items, ok := x.([]any)
		if !ok || len(items) != v.Len() {
			return bad()
		}
		for i, it := range items {
			if err := fromTree(it, v.Index(i)); err != nil {
				return err
			}
		}
		return nil
	case reflect.Map:
		m, ok := x.(map[string]any)
		if !ok {
			return bad()
		}
		out := reflect.MakeMapWithSize(t, len(m))
		for ks, it := range m {
			k := reflect.New(t.Key()).Elem()
			switch t.Key().Kind() {
			case reflect.String:
				k.SetString(ks)
			case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
				n, err := strconv.ParseInt(ks, 10, 64)
				if err != nil || k.OverflowInt(n) {
					return fmt.Errorf("map key %q for a %s", ks, t)
				}
				k.SetInt(n)
			case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
				n, err := strconv.ParseUint(ks, 10, 64)
				if err != nil || k.OverflowUint(n) {
					return fmt.Errorf("map key %q for a %s", ks, t)
				}
				k.SetUint(n)
			default:
				return fmt.Errorf("a map key of type %s cannot come over the wire", t.Key())
			}
			e := reflect.New(t.Elem()).Elem()
			if err := fromTree(it, e); err != nil {
				return err
			}
			out.SetMapIndex(k, e)
		}
		v.Set(out)
		return nil
	case reflect.Struct:
		m, ok := x.(map[string]any)
		if !ok {
			return bad()
		}
		v.SetZero()
		for i := range t.NumField() {
			f := t.Field(i)
			it, ok := m[f.Name]
			if !ok || !f.IsExported() {
				continue
			}
			if err := fromTree(it, v.Field(i)); err != nil {
				return fmt.Errorf("%s.%s: %w", t, f.Name, err)
			}
		}
		return nil
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		b, err := json.Marshal(x)
		if err != nil {
			return err
		}
		return json.Unmarshal(b, v.Addr().Interface())
	}
	switch t.Kind() {
	case reflect.Bool:
		b, ok := x.(bool)
		if !ok {
			return bad()
		}
		v.SetBool(b)
	case reflect.String:
		s, ok := x.(string)
		if !ok {
			return bad()
		}
		v.SetString(s)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, ok := x.(json.Number)
		if !ok {
			return bad()
		}
		i, err := n.Int64()
		if err != nil || v.OverflowInt(i) {
			return fmt.Errorf("%s for a %s", n, t)
		}
		v.SetInt(i)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, ok := x.(json.Number)
		if !ok {
			return bad()
		}
		u, err := strconv.ParseUint(n.String(), 10, 64)
		if err != nil || v.OverflowUint(u) {
			return fmt.Errorf("%s for a %s", n, t)
		}
		v.SetUint(u)
	case reflect.Float32, reflect.Float64:
		n, ok := x.(json.Number)
		if !ok {
			return bad()
		}
		f, err := strconv.ParseFloat(n.String(), t.Bits())
		if err != nil {
			return fmt.Errorf("%s for a %s", n, t)
		}
		v.SetFloat(f)
	default:
		return fmt.Errorf("a %s cannot come over the wire", t)
	}
	return nil
}
