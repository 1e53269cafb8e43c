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

package agentapi

import (
	"encoding/base64"
	"fmt"
	"math"
	"unicode/utf8"
)

// Chunk encodings.
const (
	EncodingText   = "text"
	EncodingBase64 = "base64"
)

// Chunk is a piece of a job's output in a form that survives JSON byte for
// byte: Data is the bytes as text or as standard base64 (Encoding).
type Chunk struct {
	// Stream is stdout or stderr.
	Stream string `json:"stream"`
	// Seq numbers the chunk in the job's output, from 0, across both
	// streams.
	Seq uint64 `json:"seq"`
	// Offset is where Data starts within the chunk; non-zero only when a
	// poll's byte budget split the chunk and this is a later part.
	Offset   int    `json:"offset,omitempty"`
	Encoding string `json:"encoding"`
	Data     string `json:"data"`
}

// EncodeChunk returns a chunk's bytes in the encoding that is smaller in
// JSON: text when they are valid UTF-8 and their JSON string (escapes
// counted) is no longer than their base64, else standard base64. Either
// way Bytes gives back the exact bytes: JSON would replace invalid UTF-8
// with U+FFFD, so text is used only when there is nothing to replace. A
// chunk that ends or starts in the middle of a multi-byte character (the
// process wrote it in two pieces) is not valid UTF-8 on its own and goes
// as base64; so does output full of control bytes or NULs, which JSON
// escapes to six bytes each (\u0001) where base64 spends four bytes on
// three.
func EncodeChunk(stream string, seq uint64, offset int, data []byte) Chunk {
	c := Chunk{Stream: stream, Seq: seq, Offset: offset}
	c.Encoding, c.Data = EncodeData(data)
	return c
}

// EncodeData encodes bytes as EncodeChunk does.
func EncodeData(b []byte) (encoding, data string) {
	if PreferText(b) {
		return EncodingText, string(b)
	}
	return EncodingBase64, base64.StdEncoding.EncodeToString(b)
}

// PreferText says whether b goes as text: it is valid UTF-8 and its JSON
// string is no longer than its base64.
func PreferText(b []byte) bool {
	return jsonTextFits(b, base64.StdEncoding.EncodedLen(len(b))) && utf8.Valid(b)
}

// jsonTextFits says whether JSONTextLen(b) <= limit, stopping as soon as
// it is not: output full of control bytes is told after a fifth of it.
func jsonTextFits(b []byte, limit int) bool {
	_, fits := jsonTextLen(b, limit)
	return fits
}

// JSONTextLen is the length of valid UTF-8 b as the inside of a JSON
// string, escaped as encoding/json escapes it without HTML escaping (the
// way go-sdk writes JSON-RPC messages): quote and backslash and the
// control characters that have a short form take two bytes, other control
// characters six (\u00XX), U+2028 and U+2029 six instead of three.
func JSONTextLen(b []byte) int {
	n, _ := jsonTextLen(b, math.MaxInt)
	return n
}

// jsonTextLen counts JSONTextLen(b) until it passes limit; fits says
// whether it did not.
func jsonTextLen(b []byte, limit int) (n int, fits bool) {
	n = len(b)
	for i, c := range b {
		switch {
		case c == '"' || c == '\\' || c == '\n' || c == '\r' || c == '\t' || c == '\b' || c == '\f':
			n++
		case c < 0x20:
			n += 5
		case c == 0xE2 && i+2 < len(b) && b[i+1] == 0x80 && (b[i+2] == 0xA8 || b[i+2] == 0xA9):
			n += 3
		default:
			continue
		}
		if n > limit {
			return n, false
		}
	}
	return n, n <= limit
}

// Bytes decodes the chunk's data; it is the inverse of EncodeChunk and is
// strict about the encoding name and base64 padding.
func (c Chunk) Bytes() ([]byte, error) {
	switch c.Encoding {
	case EncodingText:
		return []byte(c.Data), nil
	case EncodingBase64:
		return base64.StdEncoding.Strict().DecodeString(c.Data)
	}
	return nil, fmt.Errorf("unknown chunk encoding %q", c.Encoding)
}
