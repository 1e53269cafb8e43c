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

package cmdflags

import (
	"flag"
	"fmt"
	"os/exec"
	"strings"
)

// LookRunsc resolves --runsc: the binary named, runsc from PATH when none
// is (absent: "", gVisor not offered), or "" for "off".
func LookRunsc(flag string) (string, error) {
	switch flag {
	case "off":
		return "", nil
	case "":
		if p, err := exec.LookPath("runsc"); err == nil {
			return p, nil
		}
		return "", nil
	}
	p, err := exec.LookPath(flag)
	if err != nil {
		return "", fmt.Errorf("--runsc: %w", err)
	}
	return p, nil
}

// StringList is a flag of strings appended to *to, given several times or
// comma-separated.
func StringList(to *[]string) flag.Value { return stringList{to} }

type stringList struct{ to *[]string }

func (l stringList) String() string {
	if l.to == nil {
		return ""
	}
	return strings.Join(*l.to, ",")
}

func (l stringList) Set(v string) error {
	for _, s := range strings.Split(v, ",") {
		if s = strings.TrimSpace(s); s != "" {
			*l.to = append(*l.to, s)
		}
	}
	return nil
}
