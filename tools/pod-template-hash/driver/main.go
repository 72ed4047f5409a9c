// Command driver computes upstream's pod-template-hash (kubernetes/kubernetes
// pkg/controller.ComputeHash with pkg/util/hash.DeepHashObject, v1.36) for pod templates
// given as JSON, so the Rust port can be checked against real go-spew output.
//
// Input (stdin): a JSON array of {"name": ..., "template": {...}, "collisionCount": null|int}.
// Quantities in the templates must be canonical (as the API server stores them).
// Output (stdout): one line per case: name, hash, and with -dump the spew text.
package main

import (
	"encoding/binary"
	"encoding/json"
	"flag"
	"fmt"
	"hash/fnv"
	"os"
	"reflect"

	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/utils/dump"
)

type testCase struct {
	Name           string          `json:"name"`
	Template       json.RawMessage `json:"template"`
	CollisionCount *int32          `json:"collisionCount"`
}

const alphanums = "bcdfghjklmnpqrstvwxz2456789"

func safeEncodeString(s string) string {
	r := make([]byte, len(s))
	for i, b := range []rune(s) {
		r[i] = alphanums[(int(b) % len(alphanums))]
	}
	return string(r)
}

// computeHash mirrors pkg/controller.ComputeHash.
func computeHash(template *v1.PodTemplateSpec, collisionCount *int32) (string, string) {
	hasher := fnv.New32a()
	hasher.Reset()
	// DeepHashObject: fmt.Fprintf(hasher, "%v", dump.ForHash(objectToWrite)).
	text := dump.ForHash(*template)
	fmt.Fprintf(hasher, "%v", text)
	if collisionCount != nil {
		collisionCountBytes := make([]byte, 8)
		binary.LittleEndian.PutUint32(collisionCountBytes, uint32(*collisionCount))
		hasher.Write(collisionCountBytes)
	}
	return safeEncodeString(fmt.Sprint(hasher.Sum32())), text
}

var quantityType = reflect.TypeOf(resource.Quantity{})

// asDecoded makes the JSON-decoded template what protobuf decoding (kube-controller-manager's
// informers) leaves: empty slices and maps become nil, and a zero non-pointer Quantity becomes
// ParseQuantity("0"), since protobuf always carries its canonical text "0".
func asDecoded(v reflect.Value) {
	if v.Type() == quantityType {
		if v.IsZero() && v.CanSet() {
			v.Set(reflect.ValueOf(resource.MustParse("0")))
		}
		return
	}
	switch v.Kind() {
	case reflect.Ptr:
		if !v.IsNil() {
			asDecoded(v.Elem())
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			if v.Type().Field(i).PkgPath == "" { // exported
				asDecoded(v.Field(i))
			}
		}
	case reflect.Slice:
		if v.Len() == 0 {
			if !v.IsNil() && v.CanSet() {
				v.Set(reflect.Zero(v.Type()))
			}
			return
		}
		for i := 0; i < v.Len(); i++ {
			asDecoded(v.Index(i))
		}
	case reflect.Map:
		if v.Len() == 0 && !v.IsNil() && v.CanSet() {
			v.Set(reflect.Zero(v.Type()))
		}
	}
}

func main() {
	dump := flag.Bool("dump", false, "print the spew text too")
	flag.Parse()
	var cases []testCase
	if err := json.NewDecoder(os.Stdin).Decode(&cases); err != nil {
		fmt.Fprintln(os.Stderr, "decoding cases:", err)
		os.Exit(1)
	}
	for _, c := range cases {
		var template v1.PodTemplateSpec
		if err := json.Unmarshal(c.Template, &template); err != nil {
			fmt.Fprintf(os.Stderr, "case %s: %v\n", c.Name, err)
			os.Exit(1)
		}
		asDecoded(reflect.ValueOf(&template))
		hash, text := computeHash(&template, c.CollisionCount)
		fmt.Printf("%s %s\n", c.Name, hash)
		if *dump {
			fmt.Println(text)
		}
	}
}
