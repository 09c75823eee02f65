// Package secrets seals sandbox secrets at rest with AES-256-GCM under a
// key kept in the data dir, so the metadata store (and its backups) never
// hold a secret's value in the clear.
package secrets

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
)

// Sealer encrypts and decrypts secret values.
type Sealer struct{ aead cipher.AEAD }

// LoadKey reads the 32-byte key at path; an error wrapping
// os.ErrNotExist if there is none.
func LoadKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	if len(b) != 32 {
		return nil, fmt.Errorf("secrets key %s: want 32 bytes, have %d", path, len(b))
	}
	return b, nil
}

// Fingerprint names key without revealing it: the hex SHA-256 of a fixed
// label and the key, so a store that keeps fingerprints to tell whether
// two ptds hold the same key (docs/ARCHITECTURE.md, "Many hosts") opens no
// secret. The keys are 32 random bytes, so the hash cannot be searched
// back to a key.
func Fingerprint(key []byte) string {
	h := sha256.New()
	h.Write([]byte("platinum key fingerprint\x00"))
	h.Write(key)
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// LoadOrCreateKey reads the 32-byte key at path, creating it (0600) on
// first use.
func LoadOrCreateKey(path string) ([]byte, error) {
	b, err := LoadKey(path)
	if err == nil || !errors.Is(err, os.ErrNotExist) {
		return b, err
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, os.ErrExist) {
		return LoadOrCreateKey(path) // created concurrently
	}
	if err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	defer f.Close()
	if _, err := f.Write(key); err != nil {
		return nil, fmt.Errorf("secrets key: %w", err)
	}
	return key, f.Sync()
}

// New returns a Sealer for a 32-byte key.
func New(key []byte) (*Sealer, error) {
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("secrets: %w", err)
	}
	return &Sealer{aead: aead}, nil
}

// Seal encrypts plaintext, binding it to aad (e.g. the sandbox ID and the
// secret's name, so a ciphertext cannot be moved to another sandbox).
func (s *Sealer) Seal(plaintext, aad string) string {
	nonce := make([]byte, s.aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		panic(err)
	}
	out := s.aead.Seal(nonce, nonce, []byte(plaintext), []byte(aad))
	return base64.StdEncoding.EncodeToString(out)
}

// Open decrypts what Seal produced with the same aad.
func (s *Sealer) Open(sealed, aad string) (string, error) {
	b, err := base64.StdEncoding.DecodeString(sealed)
	if err != nil || len(b) < s.aead.NonceSize() {
		return "", fmt.Errorf("secrets: malformed ciphertext")
	}
	pt, err := s.aead.Open(nil, b[:s.aead.NonceSize()], b[s.aead.NonceSize():], []byte(aad))
	if err != nil {
		return "", fmt.Errorf("secrets: %w", err)
	}
	return string(pt), nil
}
