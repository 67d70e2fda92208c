// Package nilness tells whether an interface value is nil or holds a nil
// pointer, so that constructors can refuse such arguments with a typed error
// instead of panicking on their first use.
package nilness

import "reflect"

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
