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

package agentserver

import (
	"github.com/playground-dev/playground/hostagent"
	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/jobs"
)

// The mapping between the protocol's types and the kernel's. Each field
// is named: a field the kernel gains reaches the wire only when a version
// of the protocol adds it here.

func wireScreen(s jobs.Screen, j jobs.JobInfo) agentapi.Screen {
	return agentapi.Screen{
		Job:  wireJob(j),
		Rows: s.Rows, Cols: s.Cols,
		Lines:     s.Lines,
		CursorRow: s.CursorRow, CursorCol: s.CursorCol,
		CursorHidden:    s.CursorHidden,
		AltScreen:       s.AltScreen,
		Title:           s.Title,
		Scrollback:      s.Scrollback,
		ScrollbackLines: s.ScrollbackLines,
	}
}

func wireHandle(h hostagent.Handle) agentapi.Handle {
	return agentapi.Handle{ID: h.ID, SandboxID: h.SandboxID, Expires: h.Expires}
}

func wireActivity(act hostagent.Activity) agentapi.Activity {
	out := agentapi.Activity{Handles: []agentapi.HandleInfo{}, Jobs: []agentapi.JobInfo{}}
	for _, h := range act.Handles {
		out.Handles = append(out.Handles, agentapi.HandleInfo{Handle: wireHandle(h.Handle), Opened: h.Opened, LastUsed: h.LastUsed})
	}
	for _, j := range act.Jobs {
		out.Jobs = append(out.Jobs, wireJob(j))
	}
	return out
}

func wireJob(j jobs.JobInfo) agentapi.JobInfo {
	info := agentapi.JobInfo{
		ID:        j.ID,
		Tenant:    j.Tenant,
		SandboxID: j.SandboxID,
		Command:   j.Command,
		State:     agentapi.JobState(j.State),
		StartedAt: j.StartedAt,
		EndedAt:   j.EndedAt,
		Input:     j.Input,
	}
	if t := j.TTY; t != nil {
		info.TTY = &agentapi.TTYSize{Rows: t.Rows, Cols: t.Cols, Scrollback: t.Scrollback}
	}
	if r := j.Result; r != nil {
		res := *r
		info.Result = &res
	}
	return info
}

func wireGap(g *jobs.Gap) *agentapi.Gap {
	if g == nil {
		return nil
	}
	return &agentapi.Gap{FromSeq: g.FromSeq, ToSeq: g.ToSeq, Chunks: g.Chunks, Bytes: g.Bytes}
}

func kernelRange(r agentapi.ReadRequest) hostagent.Range {
	kr := hostagent.Range{Length: r.Length}
	if r.Offset != nil {
		kr.Offset = *r.Offset
	}
	return kr
}

func wireFileContent(f hostagent.FileContent) agentapi.FileContent {
	return agentapi.FileContent{
		Path:     f.Path,
		Data:     f.Data,
		Size:     f.Size,
		MIME:     f.MIME,
		SHA256:   f.SHA256,
		FileSize: f.FileSize,
		Offset:   f.Offset,
		EOF:      f.EOF,
	}
}

func wireFileInfo(f hostagent.FileInfo) agentapi.FileInfo {
	return agentapi.FileInfo{Path: f.Path, Size: f.Size, MIME: f.MIME, SHA256: f.SHA256, FileSize: f.FileSize}
}

func wireDigest(d hostagent.FileDigest) agentapi.FileDigest {
	return agentapi.FileDigest{Path: d.Path, FileSize: d.Size, SHA256: d.SHA256}
}
