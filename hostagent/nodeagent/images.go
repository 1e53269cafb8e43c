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

package nodeagent

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	playgroundv1alpha1 "github.com/playground-dev/playground/api/v1alpha1"
)

// imageUnresolved says why a Sandbox with spec.image cannot be started
// yet: the manager has not recorded the digest of its reference in
// status.image (docs/images.md); "" when it has, or the Sandbox names no
// image. A sandbox runs exactly the digest the manager resolved, never a
// tag read on the node.
func imageUnresolved(sbx *playgroundv1alpha1.Sandbox) string {
	img := sbx.Spec.Image
	if img == nil {
		return ""
	}
	if st := sbx.Status.Image; st != nil && st.Reference == img.Reference && st.Digest != "" {
		return ""
	}
	return fmt.Sprintf("Waiting for the manager to resolve image %s to a digest: the sandbox starts on that digest once it is in status.image (the ImageResolved condition says how it goes)", img.Reference)
}

// waitForImage says, in the Provisioned condition, that sbx waits for its
// image's digest; the manager's write of it brings the Sandbox back
// (imageResolvedChanged).
func (r *sandboxReconciler) waitForImage(ctx context.Context, sbx *playgroundv1alpha1.Sandbox, msg string) error {
	return r.setProvisioned(ctx, sbx, metav1.ConditionFalse, playgroundv1alpha1.ReasonWaitingForImage, msg)
}

// imageResolvedChanged passes the update of a Sandbox whose status.image
// the manager changed: a sandbox that waits for its image starts then.
func imageResolvedChanged(e event.UpdateEvent) bool {
	o, n := e.ObjectOld.(*playgroundv1alpha1.Sandbox).Status.Image, e.ObjectNew.(*playgroundv1alpha1.Sandbox).Status.Image
	if o == nil || n == nil {
		return o != n
	}
	return o.Reference != n.Reference || o.Digest != n.Digest
}
