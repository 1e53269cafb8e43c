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

package httpserve

import (
	"log"
	"strings"

	"github.com/go-logr/logr"
)

// ErrorLog is an http.Server's ErrorLog (its accept and TLS handshake
// errors, a handler's panic) written to l, a line a message.
func ErrorLog(l logr.Logger) *log.Logger {
	return log.New(lineWriter{l}, "", 0)
}

type lineWriter struct{ l logr.Logger }

func (w lineWriter) Write(p []byte) (int, error) {
	w.l.Info(strings.TrimSuffix(string(p), "\n"))
	return len(p), nil
}
