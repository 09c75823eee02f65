package remote

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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

var null = []byte("null")

// decode reads the wire form data into v, which must be settable.
func decode(data []byte, v reflect.Value) error {
	t := v.Type()
	if bytes.Equal(bytes.TrimSpace(data), null) {
		v.SetZero()
		return nil
	}
	if t == timeType {
		return json.Unmarshal(data, v.Addr().Interface())
	}
	switch t.Kind() {
	case reflect.Interface:
		if t == errorType {
			var s string
			if err := json.Unmarshal(data, &s); err != nil {
				return err
			}
			v.Set(reflect.ValueOf(errors.New(s)))
			return nil
		}
		if t.NumMethod() != 0 {
			return fmt.Errorf("a %s cannot come over the wire", t)
		}
		v.Set(reflect.ValueOf(json.RawMessage(bytes.Clone(data))))
		return nil
	case reflect.Pointer:
		p := reflect.New(t.Elem())
		if err := decode(data, p.Elem()); err != nil {
			return err
		}
		v.Set(p)
		return nil
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			var b []byte
			if err := json.Unmarshal(data, &b); err != nil {
				return err
			}
			if b == nil {
				b = []byte{}
			}
			v.SetBytes(b)
			return nil
		}
		var items []json.RawMessage
		if err := json.Unmarshal(data, &items); err != nil {
			return err
		}
		s := reflect.MakeSlice(t, len(items), len(items))
		for i, it := range items {
			if err := decode(it, s.Index(i)); err != nil {
				return err
			}
		}
		v.Set(s)
		return nil
	case reflect.Array:
		var items []json.RawMessage
		if err := json.Unmarshal(data, &items); err != nil {
			return err
		}
		if len(items) != v.Len() {
			return fmt.Errorf("%d items for a %s", len(items), t)
		}
		for i, it := range items {
			if err := decode(it, v.Index(i)); err != nil {
				return err
			}
		}
		return nil
	case reflect.Map:
		var m map[string]json.RawMessage
		if err := json.Unmarshal(data, &m); err != nil {
			return err
		}
		out := reflect.MakeMapWithSize(t, len(m))
		for ks, raw := range m {
			k := reflect.New(t.Key()).Elem()
			switch t.Key().Kind() {
			case reflect.String:
				k.SetString(ks)
			case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
				n, err := strconv.ParseInt(ks, 10, 64)
				if err != nil {
					return err
				}
				k.SetInt(n)
			case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
				n, err := strconv.ParseUint(ks, 10, 64)
				if err != nil {
					return err
				}
				k.SetUint(n)
			default:
				return fmt.Errorf("a map key of type %s cannot come over the wire", t.Key())
			}
			e := reflect.New(t.Elem()).Elem()
			if err := decode(raw, e); err != nil {
				return err
			}
			out.SetMapIndex(k, e)
		}
		v.Set(out)
		return nil
	case reflect.Struct:
		var m map[string]json.RawMessage
		if err := json.Unmarshal(data, &m); err != nil {
			return err
		}
		v.SetZero()
		for i := range t.NumField() {
			f := t.Field(i)
			raw, ok := m[f.Name]
			if !ok || !f.IsExported() {
				continue
			}
			if err := decode(raw, v.Field(i)); err != nil {
				return fmt.Errorf("%s.%s: %w", t, f.Name, err)
			}
		}
		return nil
	case reflect.Func, reflect.Chan, reflect.UnsafePointer, reflect.Complex64, reflect.Complex128:
		return fmt.Errorf("a %s cannot come over the wire", t)
	}
	return json.Unmarshal(data, v.Addr().Interface())
}
