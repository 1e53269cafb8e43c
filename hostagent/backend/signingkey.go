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

import (
	"context"
	"errors"
	"fmt"
	"os"

	"github.com/playground-dev/playground/internal/keyedmutex"
	"github.com/playground-dev/playground/internal/signingkey"
)

// KeyInstaller is the SigningKeyHolder of the backends: what their
// InstallSigningKey shares (the sandbox ID checked by the backend's rule,
// the key checked as it is, the sandbox's lock held) around Install, the
// backend's own way of putting the key in the pile. A backend puts it in
// its Capabilities.
type KeyInstaller struct {
	// Name is the backend's, for errors.
	Name string
	// ValidateID is the backend's rule for sandbox IDs; nil means
	// ValidateID.
	ValidateID func(id string) error
	// Locks are the backend's per-sandbox locks.
	Locks *keyedmutex.Mutex
	// Install makes key, checked, sandbox id's signing key, id's lock
	// held; as SigningKeyHolder's InstallSigningKey.
	Install func(ctx context.Context, id string, key []byte) (live bool, err error)
	// InstallUntouched is Install into a sandbox that has run nothing of
	// its tenant's yet (InstallSigningKeyUntouched); nil means Install.
	InstallUntouched func(ctx context.Context, id string, key []byte) (live bool, err error)
}

// InstallSigningKey implements SigningKeyHolder.
func (k KeyInstaller) InstallSigningKey(ctx context.Context, id string, key []byte) (bool, error) {
	return k.install(ctx, id, key, k.Install)
}

// InstallSigningKeyUntouched implements SigningKeyHolder.
func (k KeyInstaller) InstallSigningKeyUntouched(ctx context.Context, id string, key []byte) (bool, error) {
	install := k.InstallUntouched
	if install == nil {
		install = k.Install
	}
	return k.install(ctx, id, key, install)
}

func (k KeyInstaller) install(ctx context.Context, id string, key []byte, install func(context.Context, string, []byte) (bool, error)) (bool, error) {
	validate := k.ValidateID
	if validate == nil {
		validate = ValidateID
	}
	if err := validate(id); err != nil {
		return false, err
	}
	// The key is checked as it is, not normalised: what is installed is
	// exactly what the caller holds. The error never quotes it.
	if err := signingkey.Check(key); err != nil {
		return false, fmt.Errorf("%s: sandbox %s: %w", k.Name, id, err)
	}
	defer k.Locks.Lock(id)()
	return install(ctx, id, key)
}

// WriteNewFile writes data to a file it creates at path with mode (less
// the umask), never one found under the name (O_EXCL: nor a link), and
// syncs it; on an error the file goes.
func WriteNewFile(path string, data []byte, mode os.FileMode) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return errors.Join(err, os.Remove(path))
	}
	return nil
}
