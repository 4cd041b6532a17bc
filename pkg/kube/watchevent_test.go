package kube

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
)

// TestWatchEventSerializer checks that watch event envelopes decode as
// client-go's own JSON stream serializer decodes them, whether split or
// handed to it (frames of another shape).
func TestWatchEventSerializer(t *testing.T) {
	var base runtime.Serializer
	for _, info := range dynamic.ConfigFor(&rest.Config{}).NegotiatedSerializer.SupportedMediaTypes() {
		if info.MediaType == runtime.ContentTypeJSON {
			base = info.StreamSerializer.Serializer
		}
	}
	if base == nil {
		t.Fatal("client-go has no JSON stream serializer")
	}
	ours := watchEventSerializer{Serializer: base}
	cases := map[string]struct {
		data  string
		split bool
	}{
		"Added":         {data: `{"type":"ADDED","object":{"apiVersion":"v1","kind":"X","metadata":{"name":"a"}}}`, split: true},
		"ObjectFirst":   {data: ` { "object" : {"a":[1,{"b":"}]\"{"}],"c":null} , "type" : "MODIFIED" } ` + "\n", split: true},
		"EscapesInside": {data: `{"type":"DELETED","object":{"s":"quote \" brace } bracket ] backslash \\","n":-1.5e3,"t":true}}`, split: true},
		"Error":         {data: `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","code":410}}`, split: true},
		"Bookmark":      {data: `{"type":"BOOKMARK","object":{"kind":"X","metadata":{"resourceVersion":"12"}}}`, split: true},
		"EscapedType":   {data: `{"type":"ADD\u0045D","object":{}}`},
		"OtherMember":   {data: `{"type":"ADDED","object":{},"extra":1}`},
		"NullObject":    {data: `{"type":"ADDED","object":null}`},
		"NoObject":      {data: `{"type":"ADDED"}`},
		"TypeTwice":     {data: `{"type":"ADDED","type":"DELETED","object":{}}`},
		"NotAnObject":   {data: `["ADDED",{}]`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			_, _, split := splitWatchEvent([]byte(tc.data))
			if split != tc.split {
				t.Errorf("splitWatchEvent(%s): split %t, want %t", tc.data, split, tc.split)
			}
			var want, got metav1.WatchEvent
			_, _, werr := base.Decode([]byte(tc.data), nil, &want)
			_, _, gerr := ours.Decode([]byte(tc.data), nil, &got)
			if (werr != nil) != (gerr != nil) {
				t.Fatalf("Decode(%s): error %v, client-go's %v", tc.data, gerr, werr)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Decode(%s): -client-go's, +ours:\n%s", tc.data, diff)
			}
		})
	}
}
