/*
Copyright 2026 The Playground Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

    http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

// Package manifest reads Kubernetes objects from YAML files and applies them
// with server-side apply, as `kubectl apply --server-side` would.
package manifest

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
)

// Decode reads every object of a multi-document YAML stream; empty
// documents are skipped. name labels errors.
func Decode(name string, r io.Reader) ([]*unstructured.Unstructured, error) {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(r))
	var objs []*unstructured.Unstructured
	for i := 0; ; i++ {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return objs, nil
		}
		if err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, i+1, err)
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(doc, &obj.Object); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", name, i+1, err)
		}
		if len(obj.Object) == 0 {
			continue
		}
		if obj.GetKind() == "" || obj.GetAPIVersion() == "" {
			return nil, fmt.Errorf("%s: document %d: apiVersion and kind are required", name, i+1)
		}
		objs = append(objs, obj)
	}
}

// ReadKustomization decodes the resources that dir/kustomization.yaml lists.
// Only plain files are supported: no bases, patches or generators.
func ReadKustomization(dir string) ([]*unstructured.Unstructured, error) {
	path := filepath.Join(dir, "kustomization.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if len(k.Resources) == 0 {
		return nil, fmt.Errorf("%s lists no resources", path)
	}
	var all []*unstructured.Unstructured
	for _, r := range k.Resources {
		f := filepath.Join(dir, r)
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("%s lists %s: %w", path, r, err)
		}
		objs, err := Decode(f, bytes.NewReader(b))
		if err != nil {
			return nil, err
		}
		all = append(all, objs...)
	}
	return all, nil
}

// Apply applies objs with server-side apply; objects without a namespace
// go to namespace.
func Apply(ctx context.Context, c client.Client, namespace string, objs []*unstructured.Unstructured) error {
	for _, obj := range objs {
		if obj.GetNamespace() == "" {
			obj.SetNamespace(namespace)
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(obj), client.FieldOwner(playgroundv1alpha1.ManifestFieldOwner), client.ForceOwnership); err != nil {
			return fmt.Errorf("applying %s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
	}
	return nil
}
