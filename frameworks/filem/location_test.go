package filem

import (
	"strings"
	"testing"
)

func TestParseLocation(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Location
		str  string // String(), when not in
		err  string
	}{
		{in: "/scratch/ckpt", want: Location{Path: "/scratch/ckpt"}},
		{in: "ckpt/dir", want: Location{Path: "ckpt/dir"}},
		{in: "./a:b", want: Location{Path: "./a:b"}},
		{in: "/a:b", want: Location{Path: "/a:b"}},
		{in: "file:///scratch/x", want: Location{Path: "/scratch/x"}, str: "/scratch/x"},
		{in: "node7:/scratch/ckpt", want: Location{Host: "node7", Path: "/scratch/ckpt"}},
		{in: "root@node7:/d", want: Location{User: "root", Host: "node7", Path: "/d"}},
		{in: "node7:rel/dir", want: Location{Host: "node7", Path: "rel/dir"}},
		{in: "node7:~/rel", want: Location{Host: "node7", Path: "rel"}, str: "node7:rel"},
		{in: "node7:~", want: Location{Host: "node7", Path: "."}, str: "node7:."},
		{in: "[::1]:/d", want: Location{Host: "::1", Path: "/d"}},
		{in: "u@[fe80::2]:/d", want: Location{User: "u", Host: "fe80::2", Path: "/d"}},
		{in: "sftp://user@host:2222/path/x", want: Location{User: "user", Host: "host", Port: 2222, Path: "/path/x"}},
		{in: "sftp://host/path", want: Location{Host: "host", Path: "/path"}, str: "host:/path"},
		{in: "SFTP://host/p", want: Location{Host: "host", Path: "/p"}, str: "host:/p"},
		{in: "sftp://host:22/~/ckpt", want: Location{Host: "host", Port: 22, Path: "ckpt"}},
		{in: "sftp://host/~", want: Location{Host: "host", Path: "."}, str: "host:."},
		{in: "sftp://[::1]:2222/d", want: Location{Host: "::1", Port: 2222, Path: "/d"}},
		{in: "sftp://h/a%20b", want: Location{Host: "h", Path: "/a b"}, str: "h:/a b"},
		{in: "sftp://h:22/a%20b", want: Location{Host: "h", Port: 22, Path: "/a b"}},
		{in: "", err: "empty"},
		{in: "sftp://host", err: "no path"},
		{in: "sftp://host:0/x", err: "port"},
		{in: "sftp://host:99999/x", err: "port"},
		{in: "sftp://host:/x", err: "empty port"},
		{in: "sftp://u:pw@host/x", err: "passwords"},
		{in: "sftp://host/x?y=1", err: "without query"},
		{in: "http://host/x", err: "unknown scheme"},
		{in: "file://relative", err: "absolute"},
		{in: "host:", err: "no path"},
		{in: "host:22:/x", want: Location{Host: "host", Path: "22:/x"}}, // as scp reads it
		{in: "@host:/x", err: "empty user"},
		{in: "-oProxyCommand=x:/d", err: "starts with"},
		{in: "ho st:/d", err: "holds"},
		{in: "[nothex]:/d", err: "brackets are for IPv6"},
		{in: "a\x00b", err: "NUL"},
	} {
		got, err := ParseLocation(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseLocation(%q) = %+v, %v; want an error containing %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseLocation(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
			continue
		}
		str := tc.str
		if str == "" {
			str = tc.in
		}
		if s := got.String(); s != str {
			t.Errorf("ParseLocation(%q).String() = %q, want %q", tc.in, s, str)
		}
	}
}

func TestHost(t *testing.T) {
	for _, tc := range []struct {
		user, host string
		port       int
		joined     string
	}{
		{"", "node7", 0, "node7"},
		{"root", "127.0.0.1", 2222, "root@127.0.0.1:2222"},
		{"", "::1", 0, "[::1]"},
		{"u", "::1", 22, "u@[::1]:22"},
	} {
		j := JoinHost(tc.user, tc.host, tc.port)
		if j != tc.joined {
			t.Errorf("JoinHost(%q, %q, %d) = %q, want %q", tc.user, tc.host, tc.port, j, tc.joined)
		}
		u, h, p, err := ParseHost(j)
		if err != nil || u != tc.user || h != tc.host || p != tc.port {
			t.Errorf("ParseHost(%q) = %q %q %d %v", j, u, h, p, err)
		}
	}
	for _, bad := range []string{"", "h:", "h:x", "::1", "[::1", "[h]:2", "u@", "[::1]x", "[::1]:"} {
		if u, h, p, err := ParseHost(bad); err == nil {
			t.Errorf("ParseHost(%q) = %q %q %d, want an error", bad, u, h, p)
		}
	}
	loc := Location{User: "root", Host: "n1", Port: 2200, Path: "/d"}
	if r := loc.Remote(); r != (Remote{Host: "root@n1:2200", Path: "/d"}) {
		t.Errorf("Remote() = %+v", r)
	}
}

func FuzzParseLocation(f *testing.F) {
	for _, s := range []string{"/a/b", "h:/x", "u@h:x", "[::1]:/d", "sftp://u@h:22/~/x", "sftp://[::1]/d", "file:///x", "a:b", "sftp://h/a%2Fb", "h:~"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, err := ParseLocation(s)
		if err != nil {
			return
		}
		if l.Path == "" {
			t.Fatalf("%q parsed with an empty path", s)
		}
		again, err := ParseLocation(l.String())
		if err != nil || again != l {
			t.Fatalf("%q -> %+v -> %q -> %+v, %v", s, l, l.String(), again, err)
		}
		if l.Host != "" {
			u, h, p, err := ParseHost(l.Remote().Host)
			if err != nil || u != l.User || h != l.Host || p != l.Port {
				t.Fatalf("%q: Remote().Host %q reads back as %q %q %d %v", s, l.Remote().Host, u, h, p, err)
			}
		}
	})
}
