package sandbox

import (
	"reflect"
	"testing"
	"time"
)

// fill sets every field reachable from v to a non-zero value: every map
// gets an entry, every slice an element, every pointer a target.
func fill(t *testing.T, v reflect.Value, depth int) {
	if depth > 8 {
		t.Fatalf("type nests too deep at %s", v.Type())
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int64, reflect.Int32:
		v.SetInt(7)
	case reflect.Float64:
		v.SetFloat(1.5)
	case reflect.Struct:
		if v.Type() == reflect.TypeOf(time.Time{}) {
			v.Set(reflect.ValueOf(time.Unix(1700000000, 0).UTC()))
			return
		}
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(t, v.Field(i), depth+1)
			}
		}
	case reflect.Pointer:
		p := reflect.New(v.Type().Elem())
		fill(t, p.Elem(), depth+1)
		v.Set(p)
	case reflect.Slice:
		s := reflect.MakeSlice(v.Type(), 1, 1)
		fill(t, s.Index(0), depth+1)
		v.Set(s)
	case reflect.Map:
		m := reflect.MakeMap(v.Type())
		k := reflect.New(v.Type().Key()).Elem()
		fill(t, k, depth+1)
		e := reflect.New(v.Type().Elem()).Elem()
		fill(t, e, depth+1)
		m.SetMapIndex(k, e)
		v.Set(m)
	default:
		t.Fatalf("fill: no case for %s", v.Type())
	}
}

// shared reports the path of the first map, slice or pointer a and b
// share.
func shared(a, b reflect.Value, path string) string {
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() {
			return ""
		}
		if a.Pointer() == b.Pointer() {
			return path
		}
		return shared(a.Elem(), b.Elem(), path)
	case reflect.Map:
		if a.IsNil() {
			return ""
		}
		if a.Pointer() == b.Pointer() {
			return path
		}
		for _, k := range a.MapKeys() {
			if p := shared(a.MapIndex(k), b.MapIndex(k), path+"[key]"); p != "" {
				return p
			}
		}
	case reflect.Slice:
		if a.Len() == 0 {
			return ""
		}
		if a.Pointer() == b.Pointer() {
			return path
		}
		for i := range a.Len() {
			if p := shared(a.Index(i), b.Index(i), path+"[i]"); p != "" {
				return p
			}
		}
	case reflect.Struct:
		for i := range a.NumField() {
			if !a.Type().Field(i).IsExported() {
				continue
			}
			if p := shared(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name); p != "" {
				return p
			}
		}
	}
	return ""
}

// TestCloneSharesNothing: a clone of a record with every field set equals
// it and shares no map, slice or pointer with it, so a field added to
// Sandbox later without a deep copy in Clone fails here.
func TestCloneSharesNothing(t *testing.T) {
	var sb Sandbox
	fill(t, reflect.ValueOf(&sb).Elem(), 0)
	c := sb.Clone()
	if !reflect.DeepEqual(sb, c) {
		t.Fatalf("clone differs:\n%+v\n%+v", sb, c)
	}
	if p := shared(reflect.ValueOf(sb), reflect.ValueOf(c), "Sandbox"); p != "" {
		t.Errorf("clone shares %s with the original: copy it deeply in Clone", p)
	}
	var zero Sandbox
	if z := zero.Clone(); !reflect.DeepEqual(zero, z) {
		t.Errorf("clone of the zero record differs: %+v", z)
	}
}
