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

package tools

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/playground-dev/playground/hostagent/agentapi"
	"github.com/playground-dev/playground/hostagent/bounds"
)

// Encodings of bytes in results.
const (
	encodingText   = "text"
	encodingBase64 = "base64"
)

// MaxFileBytes bounds read and write payloads: larger files are refused,
// never truncated.
const MaxFileBytes = bounds.MaxFileBytes

// maxIDLength bounds handles and job IDs from clients (the agents' are 30
// characters or so).
const maxIDLength = 128

// encodeBytes returns b in the encoding that is smaller in JSON: text when
// it is valid UTF-8 (JSON keeps it byte for byte then) and its escapes do
// not make it longer than base64, else standard base64 (agentapi.PreferText).
func encodeBytes(b []byte) (data, encoding string) {
	if agentapi.PreferText(b) {
		return string(b), encodingText
	}
	// Encoded straight into the string: EncodeToString encodes into a
	// buffer and copies it into the string, twice the megabytes of fresh
	// memory for a large output.
	var out strings.Builder
	out.Grow(base64.StdEncoding.EncodedLen(len(b)))
	enc := base64.NewEncoder(base64.StdEncoding, &out)
	_, _ = enc.Write(b) // a strings.Builder takes every write
	_ = enc.Close()
	return out.String(), encodingBase64
}

// decodeBase64 decodes a payload from a model or a program. It accepts the
// standard and the URL alphabet, with or without padding, and ignores line
// breaks and spaces (MIME-wrapped base64); it is strict otherwise, so that
// every accepted text denotes exactly one byte string. limit bounds the
// decoded size; larger payloads are refused before they are decoded.
func decodeBase64(field, s string, limit int) ([]byte, error) {
	clean := strings.Map(func(r rune) rune {
		switch r {
		case ' ', '\t', '\r', '\n':
			return -1
		}
		return r
	}, s)
	if base64.RawStdEncoding.DecodedLen(len(strings.TrimRight(clean, "="))) > limit {
		return nil, fmt.Errorf("%s decodes to more than %d bytes (the limit is 3 MiB): split the content into several files, or write parts and join them with exec (cat a b > c)", field, limit)
	}
	enc := base64.StdEncoding
	if strings.ContainsAny(clean, "-_") {
		enc = base64.URLEncoding
	}
	if !strings.HasSuffix(clean, "=") {
		enc = enc.WithPadding(base64.NoPadding)
	}
	b, err := enc.Strict().DecodeString(clean)
	if err != nil {
		var corrupt base64.CorruptInputError
		if errors.As(err, &corrupt) {
			return nil, fmt.Errorf("%s is not valid base64 (the first bad character is at offset %d of the text without whitespace): encode the bytes with standard base64, or pass text instead", field, int64(corrupt))
		}
		return nil, fmt.Errorf("%s is not valid base64: %v", field, err)
	}
	return b, nil
}

// checkHandle and checkJobID refuse an ID that no agent could have
// issued (agentapi.ValidHandle, ValidJobID: "." or "..", a path, any other
// bytes), so that garbage never travels to a node. The refusal quotes
// none of it. Ownership is the agent's check: it answers not_found for
// another tenant's handle or job.
func checkHandle(h string) error {
	if h == "" {
		return errors.New("handle is empty: pass the handle open_session gave you")
	}
	if !agentapi.ValidHandle(h) {
		return fmt.Errorf("handle %s: pass the handle open_session gave you, unchanged", idFlaw(agentapi.HandlePrefix, h))
	}
	return nil
}

func checkJobID(id string) error {
	if id == "" {
		return errors.New("job_id is empty: pass the job_id job_exec gave you")
	}
	if !agentapi.ValidJobID(id) {
		return fmt.Errorf("job_id %s: pass the job_id job_exec gave you, unchanged", idFlaw(agentapi.JobPrefix, id))
	}
	return nil
}

// idFlaw says what makes id, which agentapi refused, not one an agent
// issues (prefix and 26 characters of lowercase base32: a to z, 2 to 7),
// without quoting it.
func idFlaw(prefix, id string) string {
	const want = 26
	shape := fmt.Sprintf("(IDs Playground issues are %s and %d characters of a to z and 2 to 7)", prefix, want)
	rest, ok := strings.CutPrefix(id, prefix)
	if !ok {
		return fmt.Sprintf("does not start with %s %s", prefix, shape)
	}
	for i := range len(rest) {
		if c := rest[i]; !('a' <= c && c <= 'z' || '2' <= c && c <= '7') {
			what := fmt.Sprintf("%q", c)
			if c >= utf8.RuneSelf || c < ' ' {
				what = fmt.Sprintf("byte 0x%02x", c)
			}
			return fmt.Sprintf("has %s at position %d, a character no ID has %s", what, len(prefix)+i+1, shape)
		}
	}
	return fmt.Sprintf("has %d characters after %s, not %d %s", len(rest), prefix, want, shape)
}

// validationPrefix starts the SDK's message for arguments that do not fit
// a tool's input schema.
const validationPrefix = `validating "arguments": `

// clarifyArguments rewrites the SDK's schema-validation message into one
// that names the argument and what to do, in the tools' error style.
func clarifyArguments(tool, msg string) (string, bool) {
	detail, ok := strings.CutPrefix(msg, validationPrefix)
	if !ok {
		if !strings.HasPrefix(msg, "json: ") {
			return msg, false
		}
		detail = msg
	}
	field := ""
	if i := strings.LastIndex(detail, "/properties/"); i >= 0 {
		rest := detail[i+len("/properties/"):]
		if j := strings.Index(rest, ": "); j > 0 {
			field, detail = rest[:j], rest[j+2:]
		}
	} else {
		detail = strings.TrimPrefix(detail, "validating root: ")
	}
	var what string
	switch {
	case strings.HasPrefix(detail, "required: missing properties: "):
		var names []string
		if json.Unmarshal([]byte(strings.TrimPrefix(detail, "required: missing properties: ")), &names) == nil && len(names) > 0 {
			what = "missing required argument " + strings.Join(names, ", ")
		} else {
			what = detail
		}
	case strings.HasPrefix(detail, "unexpected additional properties "):
		what = "unknown argument " + strings.Trim(strings.TrimPrefix(detail, "unexpected additional properties "), "[]")
	case field != "":
		what = fmt.Sprintf("argument %s is invalid: %s", field, detail)
		if plain, ok := plainBound(field, detail); ok {
			what = plain
		}
	default:
		what = "the arguments are invalid: " + detail
	}
	return fmt.Sprintf("%s: %s: %s; see the tool's input schema for its arguments", "invalid_argument", tool, what), true
}

// boundHints say, for the arguments whose range matters most, what they
// mean, so that a refusal says what to give instead.
var boundHints = map[string]string{
	"timeout_seconds": "the seconds after which the command and every process it started are killed; leave it out for the tool's default",
	"wait_seconds":    "how long job_poll waits for new output when there is none",
	"max_bytes":       "the most output bytes one poll returns",
}

// plainBound rewrites the schema validator's words for a number out of
// range or of the wrong type ("minimum: -3/1 is less than 0.000000") as a
// sentence that names the argument, the value given and the bound.
func plainBound(field, detail string) (string, bool) {
	var what string
	if v, bound, ok := cutBound(detail, "minimum: ", " is less than "); ok {
		what = fmt.Sprintf("argument %s is %s, but it must be at least %s", field, v, bound)
	} else if v, bound, ok := cutBound(detail, "maximum: ", " is greater than "); ok {
		what = fmt.Sprintf("argument %s is %s, but it must be at most %s", field, v, bound)
	} else if strings.HasPrefix(detail, "type: ") && strings.HasSuffix(detail, `want "integer"`) {
		what = fmt.Sprintf("argument %s must be a whole number", field)
	} else {
		return "", false
	}
	if hint, ok := boundHints[field]; ok {
		what += " (" + hint + ")"
	}
	return what, true
}

// cutBound parses "<prefix><value><sep><bound>", the value a rational
// ("-3/1") and the bound a decimal ("0.000000"), into plain numbers.
func cutBound(detail, prefix, sep string) (value, bound string, ok bool) {
	rest, ok := strings.CutPrefix(detail, prefix)
	if !ok {
		return "", "", false
	}
	v, b, ok := strings.Cut(rest, sep)
	if !ok {
		return "", "", false
	}
	r, okV := new(big.Rat).SetString(v)
	f, err := strconv.ParseFloat(b, 64)
	if !okV || err != nil {
		return "", "", false
	}
	value = r.RatString()
	if !r.IsInt() {
		value = r.FloatString(3)
	}
	return value, strconv.FormatFloat(f, 'f', -1, 64), true
}
