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

package conformance

import (
	"bufio"
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/playground-dev/playground/hostagent/backend"
)

// testRelay: a backend that is a backend.Dialer reaches a port on a
// sandbox's own loopback from the host (the agent's path to a worker in a
// sandbox without network), and only that sandbox's.
func testRelay(t *testing.T, n *node) {
	d := n.be.Capabilities().Dialer
	if d == nil {
		t.Skip("the backend does not reach sandbox ports (backend.Dialer)")
	}
	a := n.open(t, n.spec("relay-a"))
	b := n.open(t, n.spec("relay-b"))
	const port = "18080"
	a.probeInside(t)
	a.sh(t, "setsid ~/.conformance-probe serve "+port+" </dev/null >/dev/null 2>&1 &")

	get := func(id, path string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		c, err := d.DialSandbox(ctx, id, 18080)
		if err != nil {
			return "", err
		}
		defer c.Close()
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://worker"+path, http.NoBody)
		req.Header.Set("Authorization", "Bearer inner")
		if err := req.Write(c); err != nil {
			return "", err
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		var sb strings.Builder
		_, err = bufio.NewReader(resp.Body).WriteTo(&sb)
		return sb.String(), err
	}

	t.Run("reaches the sandbox's port", func(t *testing.T) {
		n.known(t)
		// The probe starts in the background: wait for it to listen.
		var got string
		deadline := time.Now().Add(patience)
		for {
			var err error
			if got, err = get(a.id, "/mcp?x=1"); err == nil {
				break
			} else if !errors.Is(err, backend.ErrInvalidRequest) || time.Now().After(deadline) {
				t.Fatalf("reaching port %s of the sandbox: %v", port, err)
			}
			time.Sleep(50 * time.Millisecond) // the listener is not up yet: poll
		}
		if got != "probe GET /mcp?x=1 Bearer inner\n" {
			t.Fatalf("the server in the sandbox answered %q", got)
		}
	})

	t.Run("another sandbox's loopback is its own", func(t *testing.T) {
		n.known(t)
		_, err := get(b.id, "/")
		if !errors.Is(err, backend.ErrInvalidRequest) || !strings.Contains(err.Error(), "nothing accepts connections on port "+port) {
			t.Fatalf("port %s of a sandbox where nothing listens: %v, want a refusal that says so", port, err)
		}
	})

	t.Run("bad ports and sandboxes", func(t *testing.T) {
		n.known(t)
		ctx, cancel := context.WithTimeout(context.Background(), patience)
		defer cancel()
		for _, p := range []int{0, -1, 65536} {
			if c, err := d.DialSandbox(ctx, a.id, p); err == nil {
				c.Close()
				t.Errorf("port %d was dialled", p)
			}
		}
		if _, err := d.DialSandbox(ctx, "no-such-sandbox", 18080); !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("an unknown sandbox: %v, want ErrNotFound", err)
		}
	})
}
