package filem

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// Location is a place for files as a user writes it, e.g. in
// snapc_base_global_snapshot_dir:
//
//	/scratch/ckpt                      this node (also file:///scratch/ckpt)
//	node7:/scratch/ckpt                scp style, optionally user@node7:...
//	sftp://user@node7:2222/scratch/ckpt
//	sftp://node7/~/ckpt                relative to the user's home
//
// A relative Path on a remote host is relative to the user's home
// directory there, as ssh, scp and sftp take it. A local name with a colon
// before any slash reads as scp style; write it ./a:b to mean a file.
type Location struct {
	User string // "" = the component's default (the local user name)
	Host string // "" = this node; an IPv6 address without brackets
	Port int    // 0 = the component's default (22)
	Path string
}

// Remote returns the Remote FileM modules take. User and port travel in
// Remote.Host as [user@]host[:port] (see ParseHost).
func (l Location) Remote() Remote {
	return Remote{Host: JoinHost(l.User, l.Host, l.Port), Path: l.Path}
}

// String writes l back in the shortest form ParseLocation reads as l.
func (l Location) String() string {
	if l.Host == "" {
		if _, _, remote := splitSCP(l.Path); remote || hasScheme(l.Path) {
			return "./" + l.Path
		}
		return l.Path
	}
	if l.Port == 0 && !strings.HasPrefix(l.Path, "~/") && l.Path != "~" {
		if scp := JoinHost(l.User, l.Host, 0) + ":" + l.Path; !hasScheme(scp) {
			return scp
		}
	}
	u := url.URL{Scheme: "sftp", Host: l.Host, Path: l.Path}
	if strings.Contains(l.Host, ":") || l.Port != 0 {
		u.Host = net.JoinHostPort(l.Host, strconv.Itoa(l.Port))
		if l.Port == 0 {
			u.Host = "[" + l.Host + "]"
		}
	}
	if l.User != "" {
		u.User = url.User(l.User)
	}
	if !strings.HasPrefix(l.Path, "/") {
		u.Path = "/~/" + l.Path
	}
	return u.String()
}

// ParseLocation reads a Location in any of the forms Location lists.
func ParseLocation(s string) (Location, error) {
	fail := func(format string, a ...any) (Location, error) {
		return Location{}, fmt.Errorf("filem: location %q: %s", s, fmt.Sprintf(format, a...))
	}
	if s == "" {
		return fail("empty; give a directory, host:/dir or sftp://[user@]host[:port]/dir")
	}
	if strings.ContainsRune(s, 0) {
		return fail("contains a NUL byte")
	}
	if hasScheme(s) {
		scheme, rest, _ := strings.Cut(s, "://")
		switch strings.ToLower(scheme) {
		case "file":
			if !strings.HasPrefix(rest, "/") {
				return fail("a file:// location needs an absolute path (file:///dir)")
			}
			u, err := url.Parse(s)
			if err != nil {
				return fail("%v", err)
			}
			if u.Path == "" || strings.ContainsRune(u.Path, 0) {
				return fail("no path, or a NUL byte in it")
			}
			return Location{Path: u.Path}, nil
		case "sftp":
			return parseURL(s, fail)
		default:
			return fail("unknown scheme %q; use sftp:// or a plain path", scheme)
		}
	}
	host, path, remote := splitSCP(s)
	if !remote {
		return Location{Path: s}, nil
	}
	// host:path has no room for a port (scp reads host:22:/x as the path
	// 22:/x); ParseHost finds none since splitSCP cut at the first colon.
	user, h, _, err := ParseHost(host)
	if err != nil {
		return fail("%v", err)
	}
	return remoteLocation(user, h, 0, path, fail)
}

// remoteLocation takes "~" and "~/" as the home directory, the directory
// relative paths start from.
func remoteLocation(user, host string, port int, path string, fail func(string, ...any) (Location, error)) (Location, error) {
	switch {
	case path == "~":
		path = "."
	case strings.HasPrefix(path, "~/"):
		path = path[2:]
	}
	if path == "" {
		return fail("no path after the host; give host:/dir, or host:~/dir for one in the home directory")
	}
	if strings.ContainsRune(path, 0) {
		return fail("the path holds a NUL byte")
	}
	return Location{User: user, Host: host, Port: port, Path: path}, nil
}

func parseURL(s string, fail func(string, ...any) (Location, error)) (Location, error) {
	u, err := url.Parse(s)
	if err != nil {
		return fail("%v", err)
	}
	if u.Opaque != "" || u.RawQuery != "" || u.Fragment != "" || u.ForceQuery {
		return fail("an sftp location is sftp://[user@]host[:port]/path, without query or fragment")
	}
	var l Location
	if u.User != nil {
		if _, has := u.User.Password(); has {
			return fail("passwords in locations are not supported; use key authentication")
		}
		l.User = u.User.Username()
		if err := checkUser(l.User); err != nil {
			return fail("%v", err)
		}
	}
	l.Host = u.Hostname()
	if err := checkHost(l.Host); err != nil {
		return fail("%v", err)
	}
	if p := u.Port(); p != "" {
		if l.Port, err = parsePort(p); err != nil {
			return fail("%v", err)
		}
	} else if strings.HasSuffix(u.Host, ":") {
		return fail("empty port")
	}
	if u.Path == "" {
		return fail("no path; give sftp://host/dir (absolute) or sftp://host/~/dir (in the home directory)")
	}
	path := u.Path
	if path == "/~" || strings.HasPrefix(path, "/~/") {
		path = path[1:]
	}
	return remoteLocation(l.User, l.Host, l.Port, path, fail)
}

func hasScheme(s string) bool {
	scheme, _, ok := strings.Cut(s, "://")
	return ok && !strings.Contains(scheme, "/")
}

// splitSCP splits [user@]host:path; remote is false for a local path.
func splitSCP(s string) (host, path string, remote bool) {
	if strings.HasPrefix(s, "[") || strings.Contains(s, "@[") {
		if end := strings.Index(s, "]:"); end > 0 && !strings.Contains(s[:end], "/") {
			return s[:end+1], s[end+2:], true
		}
	}
	colon := strings.IndexByte(s, ':')
	if colon <= 0 || strings.Contains(s[:colon], "/") {
		return "", s, false
	}
	return s[:colon], s[colon+1:], true
}

// JoinHost writes the Remote.Host form [user@]host[:port], bracketing an
// IPv6 address.
func JoinHost(user, host string, port int) string {
	h := host
	if strings.Contains(h, ":") {
		h = "[" + h + "]"
	}
	if port != 0 {
		h += ":" + strconv.Itoa(port)
	}
	if user != "" && host != "" {
		h = user + "@" + h
	}
	return h
}

// ParseHost reads the Remote.Host form [user@]host[:port]; an IPv6 address
// is written in brackets ([::1], user@[::1]:2222). User "" and port 0 mean
// the component's defaults.
func ParseHost(s string) (user, host string, port int, err error) {
	fail := func(format string, a ...any) (string, string, int, error) {
		return "", "", 0, fmt.Errorf("filem: host %q: %s", s, fmt.Sprintf(format, a...))
	}
	rest := s
	if at := strings.LastIndexByte(rest, '@'); at >= 0 {
		user, rest = rest[:at], rest[at+1:]
		if err := checkUser(user); err != nil {
			return fail("%v", err)
		}
	}
	if strings.HasPrefix(rest, "[") {
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return fail("unclosed [")
		}
		host, rest = rest[1:end], rest[end+1:]
		if !strings.Contains(host, ":") {
			return fail("brackets are for IPv6 addresses only")
		}
		if rest != "" && !strings.HasPrefix(rest, ":") {
			return fail("unexpected %q after ]", rest)
		}
		rest = strings.TrimPrefix(rest, ":")
		if rest == "" && strings.HasSuffix(s, ":") {
			return fail("empty port")
		}
	} else {
		var hasPort bool
		host, rest, hasPort = strings.Cut(rest, ":")
		if hasPort && rest == "" {
			return fail("empty port")
		}
		if strings.Contains(host, ":") {
			return fail("write an IPv6 address in brackets")
		}
	}
	if err := checkHost(host); err != nil {
		return fail("%v", err)
	}
	if rest != "" {
		if port, err = parsePort(rest); err != nil {
			return fail("%v", err)
		}
	}
	return user, host, port, nil
}

func parsePort(p string) (int, error) {
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != p {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", p)
	}
	return n, nil
}

func checkUser(u string) error {
	if u == "" {
		return fmt.Errorf("empty user name before @")
	}
	for _, r := range u {
		if r <= ' ' || r == 0x7f || strings.ContainsRune("@:/[]%", r) {
			return fmt.Errorf("user name %q holds %q", u, r)
		}
	}
	if strings.HasPrefix(u, "-") {
		return fmt.Errorf("user name %q starts with '-'", u)
	}
	return nil
}

// checkHost accepts host names, IPv4 and IPv6 addresses. A leading '-'
// is refused so a host can never be taken for a command-line option.
func checkHost(h string) error {
	if h == "" {
		return fmt.Errorf("empty host name")
	}
	if strings.Contains(h, ":") {
		if net.ParseIP(h) == nil {
			return fmt.Errorf("%q is not an IPv6 address", h)
		}
		return nil
	}
	if strings.HasPrefix(h, "-") || strings.HasPrefix(h, ".") {
		return fmt.Errorf("host name %q starts with %q", h, h[:1])
	}
	for _, r := range h {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '.' || r == '_') {
			return fmt.Errorf("host name %q holds %q; use letters, digits, '-', '.' and '_'", h, r)
		}
	}
	return nil
}
