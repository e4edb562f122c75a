package ssa

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// ToMap turns a typed object into its JSON form. It goes through encoding/json rather than
// runtime.DefaultUnstructuredConverter because Istio's specs are protobuf messages whose JSON form
// comes from their own MarshalJSON. Their enums are then stated explicitly (see statedEnums).
func ToMap(obj any) (map[string]any, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	if spec, ok := m["spec"].(map[string]any); ok {
		stateEnums(protoSpec(obj), spec)
	}
	return m, nil
}

// protoSpec is the protobuf message in obj's Spec field, if it has one (Istio's typed objects).
func protoSpec(obj any) proto.Message {
	v := reflect.ValueOf(obj)
	if v.Kind() != reflect.Pointer || v.IsNil() || v.Elem().Kind() != reflect.Struct {
		return nil
	}
	f := v.Elem().FieldByName("Spec")
	if !f.IsValid() || !f.CanAddr() {
		return nil
	}
	msg, _ := f.Addr().Interface().(proto.Message)
	return msg
}

// stateEnums writes the enum fields at the top of a protobuf spec that its JSON form leaves out
// because they hold the zero value. For an AuthorizationPolicy that zero value is action ALLOW:
// without it in the apply body, another writer's action AUDIT or DENY would look like a superset
// of what the plugin wants, and a policy that no longer allows-only would count as unchanged.
func stateEnums(msg proto.Message, spec map[string]any) {
	if msg == nil {
		return
	}
	r := msg.ProtoReflect()
	fields := r.Descriptor().Fields()
	for i := range fields.Len() {
		fd := fields.Get(i)
		if fd.Kind() != protoreflect.EnumKind || fd.Cardinality() == protoreflect.Repeated || fd.ContainingOneof() != nil || r.Has(fd) {
			continue
		}
		if _, set := spec[fd.JSONName()]; !set {
			spec[fd.JSONName()] = string(fd.Enum().Values().ByNumber(0).Name())
		}
	}
}

// DesiredHash hashes the applied form of an object (without the hash annotation itself).
// encoding/json sorts map keys, so the hash is stable.
func DesiredHash(m map[string]any) (string, error) {
	data, err := json.Marshal(m)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:8]), nil
}

// Holds reports whether obj holds every field of the apply body with the same value (see
// Contains), and if not, the path of the first that differs (".spec.action"). An object without
// a JSON form holds nothing, and err says why.
func Holds(obj any, body map[string]any) (held bool, firstDiff string, err error) {
	m, err := ToMap(obj)
	if err != nil {
		return false, "", err
	}
	held, firstDiff = Contains(m, body, "")
	return held, firstDiff, nil
}

// Contains reports whether every field set in want has the same value in got. Maps may hold more
// (defaults the API server filled in, fields other writers own); lists must match element by
// element, because Istio's lists (rules, principals) are atomic and an extra rule is a change.
// It returns the path of the first difference, for logs and tests.
func Contains(got, want any, path string) (bool, string) {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return false, path
		}
		for k, wv := range w {
			gv, ok := g[k]
			if !ok {
				if isEmpty(wv) {
					continue
				}
				return false, path + "." + k
			}
			if ok, at := Contains(gv, wv, path+"."+k); !ok {
				return false, at
			}
		}
		return true, ""
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return false, path
		}
		for i := range w {
			if ok, at := Contains(g[i], w[i], fmt.Sprintf("%s[%d]", path, i)); !ok {
				return false, at
			}
		}
		return true, ""
	default:
		return reflect.DeepEqual(got, want), path
	}
}

// isEmpty is true for JSON values that server-side apply treats as unset.
func isEmpty(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case map[string]any:
		return len(t) == 0
	case []any:
		return len(t) == 0
	}
	return false
}
