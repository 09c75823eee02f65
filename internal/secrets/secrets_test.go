package secrets

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestSealOpen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "key")
	key, err := LoadOrCreateKey(path)
	if err != nil {
		t.Fatal(err)
	}
	again, _ := LoadOrCreateKey(path)
	if string(again) != string(key) {
		t.Fatal("key changed on reload")
	}
	s, _ := New(key)
	sealed := s.Seal("sk-live-123", "sbx_a/API_KEY")
	if strings.Contains(sealed, "sk-live") {
		t.Fatal("ciphertext contains the plaintext")
	}
	if got, err := s.Open(sealed, "sbx_a/API_KEY"); err != nil || got != "sk-live-123" {
		t.Fatalf("open = %q %v", got, err)
	}
	if _, err := s.Open(sealed, "sbx_b/API_KEY"); err == nil {
		t.Error("a ciphertext opened under another sandbox")
	}
	other, _ := New(make([]byte, 32))
	if _, err := other.Open(sealed, "sbx_a/API_KEY"); err == nil {
		t.Error("a ciphertext opened with another key")
	}
}
