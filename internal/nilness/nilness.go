// Package nilness tells whether an interface value is nil or holds a nil
// pointer, so that constructors can refuse such arguments with a typed error
// instead of panicking on their first use.
package nilness

import (
	"fmt"
	"reflect"
)

// Is reports whether v is nil or an interface holding a nil pointer, map,
// slice, function or channel (such as a nil *clientv3.Client passed as a
// clientv3.KV), on which any call would panic.
func Is(v any) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Map, reflect.Slice, reflect.Func, reflect.Chan:
		return rv.IsNil()
	}
	return false
}

// Field is an optional interface-typed field, by name, for TypedNil.
type Field struct {
	Name  string
	Value any
}

// TypedNil returns an error naming the first of fields that holds a typed
// nil ("logger is a nil *hclog.intLogger"), which would pass a nil check
// and fail on its first use; nil if none does. A plain nil passes: it
// selects the field's default. Callers wrap the error in their sentinel.
func TypedNil(fields ...Field) error {
	for _, f := range fields {
		if f.Value != nil && Is(f.Value) {
			return fmt.Errorf("%s is a nil %T", f.Name, f.Value)
		}
	}
	return nil
}
