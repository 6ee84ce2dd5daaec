// Command protoschema writes what k8sailor needs to turn the apiserver's protobuf objects into
// the JSON the apiserver itself would have written for them: for every Go type reachable from
// a list kind of client-go's scheme, its fields' protobuf numbers and how encoding/json writes
// them (name, inlining, omitempty/omitzero, pointer, and the types with their own JSON form).
// The apiserver's JSON is encoding/json of objects decoded from etcd's protobuf, so these facts
// are all it takes to write the same JSON from the same protobuf.
//
//	go run . > ../../pkg/kubeproto/src/schema.json
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/scheme"
)

// Value is how one value (a field's, an element's, a map entry's) is written.
type Value struct {
	// string, bool, int, uint, float, bytes, time, microtime, duration, quantity,
	// intorstring, raw (RawExtension, FieldsV1: their bytes are JSON), strings (a named
	// []string: a message of its own, the strings at 1), message.
	Kind    string `json:"kind"`
	Message int    `json:"message,omitempty"` // index into Schema.Messages when Kind is message
}

type Field struct {
	Number int    `json:"number"`
	JSON   string `json:"json,omitempty"`
	// The message's fields are written in place of this one (`json:",inline"`).
	Inline    bool `json:"inline,omitempty"`
	OmitEmpty bool `json:"omitempty,omitempty"`
	OmitZero  bool `json:"omitzero,omitempty"`
	Pointer   bool `json:"pointer,omitempty"`
	// list: a Go slice (nil when no element was sent); map: protobuf map entries, keys sorted.
	Shape string `json:"shape,omitempty"`
	Key   *Value `json:"key,omitempty"`
	Value Value  `json:"value"`
	// Fields of the Go struct that protobuf does not carry are not listed: JSON never sees them
	// in an object decoded from protobuf.
}

type Message struct {
	Name   string  `json:"name"`
	Fields []Field `json:"fields"`
}

type Kind struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
	// The list's type: ListMeta at 1, items at 2.
	List int `json:"list"`
}

// Object is a kind clients send k8sailor itself that no list holds.
type Object struct {
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
	Message int    `json:"message"`
}

// objects are the kinds of Object: k9s sends its SelfSubjectAccessReviews in protobuf.
var objects = []schema.GroupVersionKind{
	{Group: "authorization.k8s.io", Version: "v1", Kind: "SelfSubjectAccessReview"},
}

type Schema struct {
	Generator string   `json:"generator"`
	Kinds     []Kind   `json:"kinds"`
	Objects   []Object `json:"objects"`
	// metav1.Status: what the apiserver answers instead of an object, in the encoding asked.
	Status   int       `json:"status"`
	Messages []Message `json:"messages"`
}

var special = map[reflect.Type]string{
	reflect.TypeOf(metav1.Time{}):          "time",
	reflect.TypeOf(metav1.MicroTime{}):     "microtime",
	reflect.TypeOf(metav1.Duration{}):      "duration",
	reflect.TypeOf(resource.Quantity{}):    "quantity",
	reflect.TypeOf(intstr.IntOrString{}):   "intorstring",
	reflect.TypeOf(runtime.RawExtension{}): "raw",
	reflect.TypeOf(metav1.FieldsV1{}):      "raw",
}

type walker struct {
	schema  Schema
	index   map[reflect.Type]int
	failure []string
}

func (w *walker) message(t reflect.Type) int {
	if i, ok := w.index[t]; ok {
		return i
	}
	i := len(w.schema.Messages)
	w.index[t] = i
	w.schema.Messages = append(w.schema.Messages, Message{Name: t.PkgPath() + "." + t.Name()})
	fields := []Field{}
	for f := 0; f < t.NumField(); f++ {
		sf := t.Field(f)
		ptag, ok := sf.Tag.Lookup("protobuf")
		if !ok {
			continue
		}
		parts := strings.Split(ptag, ",")
		number, err := strconv.Atoi(parts[1])
		if err != nil {
			w.failure = append(w.failure, fmt.Sprintf("%s.%s: protobuf tag %q", t, sf.Name, ptag))
			continue
		}
		jtag := sf.Tag.Get("json")
		if jtag == "-" {
			continue
		}
		jparts := strings.Split(jtag, ",")
		field := Field{Number: number, JSON: jparts[0]}
		for _, o := range jparts[1:] {
			switch o {
			case "omitempty":
				field.OmitEmpty = true
			case "omitzero":
				field.OmitZero = true
			case "inline":
				field.Inline = true
			}
		}
		if field.JSON == "" && !field.Inline {
			if sf.Anonymous {
				field.Inline = true
			} else {
				field.JSON = sf.Name
			}
		}
		ft := sf.Type
		if ft.Kind() == reflect.Pointer {
			field.Pointer = true
			ft = ft.Elem()
		}
		where := t.String() + "." + sf.Name
		switch {
		case special[ft] != "":
			field.Value = Value{Kind: special[ft]}
		case ft.Kind() == reflect.Slice && ft.Elem().Kind() != reflect.Uint8:
			if ft.Name() != "" {
				// A named slice is its own protobuf message (items at 1): not met in kinds yet.
				w.failure = append(w.failure, where+": named slice "+ft.String())
			}
			field.Shape = "list"
			field.Value = w.value(ft.Elem(), where)
		case ft.Kind() == reflect.Map:
			field.Shape = "map"
			k := w.value(ft.Key(), where+" key")
			field.Key = &k
			field.Value = w.value(ft.Elem(), where+" value")
		default:
			field.Value = w.value(ft, where)
		}
		if field.OmitZero && field.Value.Kind != "time" && field.Value.Kind != "microtime" {
			w.failure = append(w.failure, where+": omitzero on "+ft.String())
		}
		if field.Inline && field.Value.Kind != "message" {
			w.failure = append(w.failure, where+": inline "+ft.String())
		}
		fields = append(fields, field)
	}
	w.schema.Messages[i].Fields = fields
	return i
}

func (w *walker) value(t reflect.Type, where string) Value {
	if t.Kind() == reflect.Pointer {
		w.failure = append(w.failure, where+": pointer element "+t.String())
		t = t.Elem()
	}
	if s := special[t]; s != "" {
		return Value{Kind: s}
	}
	switch t.Kind() {
	case reflect.String:
		return Value{Kind: "string"}
	case reflect.Bool:
		return Value{Kind: "bool"}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return Value{Kind: "int"}
	case reflect.Uint, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return Value{Kind: "uint"}
	case reflect.Float32, reflect.Float64:
		return Value{Kind: "float"}
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return Value{Kind: "bytes"}
		}
		if t.Name() != "" && t.Elem().Kind() == reflect.String {
			// A named []string (ExtraValue) is a message of its own, its strings at 1.
			return Value{Kind: "strings"}
		}
	case reflect.Struct:
		return Value{Kind: "message", Message: w.message(t)}
	}
	w.failure = append(w.failure, where+": unsupported "+t.String())
	return Value{Kind: "unsupported"}
}

func main() {
	w := &walker{index: map[reflect.Type]int{}}
	w.schema.Generator = "hack/protoschema (k8s.io/api v0.35.4)"
	types := scheme.Scheme.AllKnownTypes()
	gvks := make([]string, 0, len(types))
	byName := map[string]reflect.Type{}
	for gvk, t := range types {
		if !strings.HasSuffix(gvk.Kind, "List") || gvk.Kind == "List" || gvk.Version == runtime.APIVersionInternal {
			continue
		}
		items, ok := t.FieldByName("Items")
		if !ok || items.Type.Kind() != reflect.Slice || items.Type.Elem().Kind() != reflect.Struct {
			continue
		}
		key := gvk.Group + "/" + gvk.Version + "/" + gvk.Kind
		gvks = append(gvks, key)
		byName[key] = t
	}
	sort.Strings(gvks)
	for _, key := range gvks {
		t := byName[key]
		parts := strings.SplitN(key, "/", 3)
		w.schema.Kinds = append(w.schema.Kinds, Kind{
			Group: parts[0], Version: parts[1], Kind: strings.TrimSuffix(parts[2], "List"),
			List: w.message(t),
		})
	}
	for _, gvk := range objects {
		t, ok := types[gvk]
		if !ok {
			w.failure = append(w.failure, gvk.String()+": not in client-go's scheme")
			continue
		}
		w.schema.Objects = append(w.schema.Objects, Object{
			Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind, Message: w.message(t),
		})
	}
	w.schema.Status = w.message(reflect.TypeOf(metav1.Status{}))
	if len(w.failure) > 0 {
		sort.Strings(w.failure)
		fmt.Fprintln(os.Stderr, strings.Join(w.failure, "\n"))
	}
	out := json.NewEncoder(os.Stdout)
	if err := out.Encode(w.schema); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
