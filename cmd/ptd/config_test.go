package main

import (
	"fmt"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"

	"github.com/platinum-dev/platinum/internal/hostjoin"
	"github.com/platinum-dev/platinum/internal/preview"
)

// TestServeDefaults pins what `ptd serve` with no flags uses: other issues,
// the README and outside checks rely on these exact values.
func TestServeDefaults(t *testing.T) {
	c, err := parseConfig("ptd serve", nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, got, want string }{
		{"--listen", c.listen, "127.0.0.1:7070"},
		{"--data-dir", c.dataDir, "/var/lib/platinum"},
		{"--objects", c.objects, "/var/lib/platinum/objects"},
		{"host data dir", c.host.DataDir, "/var/lib/platinum"},
		{"--ssh-listen", c.sshListen, "127.0.0.1:2222"},
	} {
		if tc.got != tc.want {
			t.Errorf("%s = %q, want %q", tc.name, tc.got, tc.want)
		}
	}
	if c.s3.Endpoint != "" {
		t.Errorf("default object store is S3 at %q, want the local directory", c.s3.Endpoint)
	}
	// The sandbox address pool lies inside the shared address space
	// 100.64.0.0/10, never in the host's private ranges.
	shared := netip.MustParsePrefix("100.64.0.0/10")
	sub := c.host.Network.Subnet
	if !sub.IsValid() || !shared.Contains(sub.Addr()) || sub.Bits() < shared.Bits() {
		t.Errorf("default --subnet %v is not inside %v", sub, shared)
	}
	if !c.host.Network.Egress {
		t.Error("outbound traffic is blocked by default; want NAT egress on")
	}
}

// TestSubnetFlag: the address pool is configurable.
func TestSubnetFlag(t *testing.T) {
	c, err := parseConfig("ptd serve", []string{"--subnet", "100.100.7.0/24"})
	if err != nil {
		t.Fatal(err)
	}
	if got := c.host.Network.Subnet.String(); got != "100.100.7.0/24" {
		t.Errorf("subnet = %s", got)
	}
	if _, err := parseConfig("ptd serve", []string{"--subnet", "not-a-cidr"}); err == nil {
		t.Error("--subnet not-a-cidr accepted")
	}
}

// TestMCPAllowDeleteAny: /mcp's delete guard is on unless the flag says
// otherwise (docs/mcp.md).
func TestMCPAllowDeleteAny(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want bool
	}{{nil, false}, {[]string{"--mcp-allow-delete-any"}, true}} {
		c, err := parseConfig("ptd serve", tc.args)
		if err != nil || c.mcpAllowDeleteAny != tc.want {
			t.Errorf("%v: mcpAllowDeleteAny %v, %v; want %v", tc.args, c.mcpAllowDeleteAny, err, tc.want)
		}
	}
}

// TestStoreFlag: --store keeps SQLite in the data dir by default and
// picks the store by URL scheme.
func TestStoreFlag(t *testing.T) {
	for _, tc := range []struct {
		arg     string
		want    storeFlag
		wantErr bool
	}{
		{"", storeFlag{kind: "sqlite", target: "/var/lib/platinum/platinum.db"}, false},
		{"/srv/pt/meta.db", storeFlag{kind: "sqlite", target: "/srv/pt/meta.db"}, false},
		{"sqlite:///srv/pt/meta.db", storeFlag{kind: "sqlite", target: "/srv/pt/meta.db"}, false},
		{"postgres://pt@db.internal:5432/platinum?sslmode=require", storeFlag{kind: "postgres", target: "postgres://pt@db.internal:5432/platinum?sslmode=require"}, false},
		{"postgresql://pt@/platinum?host=/run/postgresql", storeFlag{kind: "postgres", target: "postgresql://pt@/platinum?host=/run/postgresql"}, false},
		{"mysql://root@localhost/pt", storeFlag{}, true},
		{"sqlite://", storeFlag{}, true},
	} {
		t.Run(tc.arg, func(t *testing.T) {
			args := []string{}
			if tc.arg != "" {
				args = append(args, "--store", tc.arg)
			}
			c, err := parseConfig("ptd serve", args)
			if (err != nil) != tc.wantErr {
				t.Fatalf("parseConfig(--store %q) error = %v, want error %v", tc.arg, err, tc.wantErr)
			}
			if !tc.wantErr && c.store != tc.want {
				t.Errorf("--store %q = %+v, want %+v", tc.arg, c.store, tc.want)
			}
		})
	}
	if s := (storeFlag{kind: "postgres", target: "postgres://pt:s3cret@db/pt"}).String(); s != "postgres" {
		t.Errorf("a postgres store logs as %q: the URL may hold a password", s)
	}
}

// TestS3Flags: --s3-endpoint with the keys in the environment is a valid
// object store config (it used to miss the part size and retries, so ptd
// refused to start with any S3 endpoint).
func TestS3Flags(t *testing.T) {
	t.Setenv("PT_S3_ACCESS_KEY", "ak")
	t.Setenv("PT_S3_SECRET_KEY", "sk")
	c, err := parseConfig("ptd serve", []string{"--s3-endpoint", "http://127.0.0.1:9000"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.s3.Validate(); err != nil {
		t.Fatalf("--s3-endpoint gives an invalid config: %v", err)
	}
	if c.s3.Region != "us-east-1" || !c.s3.PathStyle {
		t.Errorf("s3 config = %+v", c.s3)
	}
}

// TestPreviewPublicURL: --preview-public-url sets the scheme, domain and
// port preview URLs name; anything but scheme://domain[:port], or a domain
// other than an explicit --preview-domain, is refused.
func TestPreviewPublicURL(t *testing.T) {
	for _, tc := range []struct {
		raw       string
		domainSet bool
		want      string // scheme domain port, or "" for an error
	}{
		{"https://preview.example.com", false, "https preview.example.com 0"},
		{"http://localhost:8081", false, "http localhost 8081"},
		{"https://preview.example.com:8443/", true, "https preview.example.com 8443"},
		{"https://preview.example.com", true, ""}, // --preview-domain says localhost
		{"https://preview.example.com/x", false, ""},
		{"https://u@preview.example.com", false, ""},
		{"preview.example.com", false, ""},
		{"https://preview.example.com?a=b", false, ""},
	} {
		pc := preview.DefaultConfig()
		if tc.domainSet && tc.raw == "https://preview.example.com:8443/" {
			pc.Domain = "preview.example.com"
		}
		err := previewPublicURL(&pc, tc.raw, tc.domainSet)
		if err == nil {
			err = pc.Validate()
		}
		got := ""
		if err == nil {
			got = fmt.Sprint(pc.Scheme, " ", pc.Domain, " ", pc.URLPort)
		}
		if got != tc.want {
			t.Errorf("%q (domain set %v): %q %v, want %q", tc.raw, tc.domainSet, got, err, tc.want)
		}
	}
}

// TestJoinFlags: a host joins with --role=host --join URL --host-token T
// and no --store; every other mix is refused with what to do.
func TestJoinFlags(t *testing.T) {
	tok := "0123456789abcdef0123456789abcdef"
	for _, tc := range []struct {
		name    string
		args    []string
		want    storeFlag
		wantErr string
	}{
		{"a joined host", []string{"--role", "host", "--join", "http://10.0.0.1:7070/", "--host-token", tok},
			storeFlag{kind: "remote", target: "http://10.0.0.1:7070"}, ""},
		{"a platform ptd serving hosts on SQLite", []string{"--role", "api", "--host-token", tok},
			storeFlag{kind: "sqlite", target: "/var/lib/platinum/platinum.db"}, ""},
		{"host without --join", []string{"--role", "host", "--host-token", tok}, storeFlag{}, "needs --join"},
		{"host without a token", []string{"--role", "host", "--join", "http://10.0.0.1:7070"}, storeFlag{}, "--host-token"},
		{"host with a store", []string{"--role", "host", "--join", "http://10.0.0.1:7070", "--host-token", tok, "--store", "postgres://x/y"}, storeFlag{}, "drop --store"},
		{"join without the host role", []string{"--join", "http://10.0.0.1:7070", "--host-token", tok}, storeFlag{}, "--join needs --role=host"},
		{"a join URL that is none", []string{"--role", "host", "--join", "10.0.0.1:7070", "--host-token", tok}, storeFlag{}, "http(s)://HOST:PORT"},
		{"a short token", []string{"--role", "api", "--host-token", "short"}, storeFlag{}, "at least 32"},
		{"api on SQLite without hosts joining", []string{"--role", "api"}, storeFlag{}, "--host-token"},
		{"an unknown role", []string{"--role", "worker"}, storeFlag{}, "all, api or host"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseConfig("ptd serve", tc.args)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want one saying %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.store != tc.want || !c.shared() {
				t.Fatalf("store %+v shared %v, want %+v shared", c.store, c.shared(), tc.want)
			}
		})
	}
}

// TestApplyJoin: a joined host takes the platform's region, keys and
// object store, but keeps an object store of its own and refuses another
// region.
func TestApplyJoin(t *testing.T) {
	info := hostjoin.Info{Region: "eu", SecretsKey: []byte("s"), PreviewKey: []byte("p"), SSHHostKey: []byte("h"),
		Objects: hostjoin.Objects{Endpoint: "http://127.0.0.1:9000", Region: "r1", AccessKey: "a", SecretKey: "k", Bucket: "arch"}}
	base := []string{"--role", "host", "--join", "http://127.0.0.1:7070", "--host-token", "0123456789abcdef0123456789abcdef"}
	c, err := parseConfig("ptd serve", base)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.applyJoin(info); err != nil {
		t.Fatal(err)
	}
	if c.region != "eu" || string(c.secretsKey) != "s" || string(c.previewKey) != "p" || string(c.sshHostKey) != "h" || c.s3.Endpoint != info.Objects.Endpoint ||
		c.s3.AccessKey != "a" || c.s3.SecretKey != "k" || c.s3.Region != "r1" || c.bucket != "arch" {
		t.Fatalf("after the join: %+v", c)
	}
	// What the platform's ptd answers is what a host applies.
	if got := c.joinInfo(info.SecretsKey, info.PreviewKey, info.SSHHostKey); fmt.Sprint(got) != fmt.Sprint(info) {
		t.Fatalf("joinInfo = %+v, want %+v", got, info)
	}
	own, err := parseConfig("ptd serve", append(base, "--objects", "/srv/objects", "--region", "eu"))
	if err != nil {
		t.Fatal(err)
	}
	if err := own.applyJoin(info); err != nil || own.s3.Endpoint != "" || own.objects != "/srv/objects" {
		t.Fatalf("a host with its own --objects: %+v %v", own, err)
	}
	other, _ := parseConfig("ptd serve", append(base, "--region", "us"))
	if err := other.applyJoin(info); err == nil || !strings.Contains(err.Error(), `region "eu"`) {
		t.Fatalf("a host of another region joined: %v", err)
	}
}

// TestSSHKeys: the gateway's relay key is always the data dir's own; the
// host key clients see is that too by default, the --ssh-host-key file
// (made if missing) when given, else the platform's on a joined host.
func TestSSHKeys(t *testing.T) {
	dir := t.TempDir()
	cfg := config{dataDir: dir}
	host, relay, _, err := sshKeys(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fp := func(s ssh.Signer) string { return ssh.FingerprintSHA256(s.PublicKey()) }
	if fp(host) != fp(relay) {
		t.Fatalf("by default the host key %s is not the relay key %s", fp(host), fp(relay))
	}
	shared := filepath.Join(t.TempDir(), "platform_key")
	platform, _, pem, err := sshKeys(config{dataDir: t.TempDir(), sshHostKeyFile: shared})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		cfg  config
		want string
	}{
		{"--ssh-host-key", config{dataDir: dir, sshHostKeyFile: shared}, fp(platform)},
		{"joined", config{dataDir: dir, sshHostKey: pem}, fp(platform)},
	} {
		h, r, _, err := sshKeys(tc.cfg)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if fp(h) != tc.want || fp(r) != fp(relay) {
			t.Errorf("%s: host key %s, relay key %s; want %s and the data dir's %s", tc.name, fp(h), fp(r), tc.want, fp(relay))
		}
	}
	if _, _, _, err := sshKeys(config{dataDir: dir, sshHostKey: []byte("not a key")}); err == nil {
		t.Error("a platform key that does not parse was taken")
	}
}
