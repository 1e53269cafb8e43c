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

package backend

import "os"

// FileExists reports whether anything is at path, not following a final
// symbolic link: a link counts, dangling or not. Backends test their own
// state directories with it, some of whose entries a sandbox's root can
// write, so it never reads through what such a root left there.
func FileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// AppendLog adds a line of the agent's to a log the agent keeps of a
// sandbox (its init's, its QEMU's), for whoever reads it on the node.
func AppendLog(path, line string) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.WriteString("playground-agent: " + line)
}
