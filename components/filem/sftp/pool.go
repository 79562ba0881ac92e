package sftp

import (
	"context"
	"crypto/ed25519"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	psftp "github.com/pkg/sftp"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"

	"gompi/frameworks/filem"
)

// pool holds one ssh connection per user@host:port, each with up to
// cfg.sessions SFTP sessions.
type pool struct {
	cfg   config
	log   *slog.Logger
	mu    sync.Mutex
	conns map[string]*conn
}

func newPool(cfg config, log *slog.Logger) *pool {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &pool{cfg: cfg, log: log, conns: map[string]*conn{}}
}

// conn is one ssh connection and its sessions. Fields below ready are
// set before ready is closed and read-only afterwards.
type conn struct {
	key   string
	ready chan struct{}
	err   error // dialing failed

	client      *ssh.Client
	done        chan struct{} // closed when the connection has ended
	posixRename bool
	fsync       bool
	statvfs     bool

	// guarded by pool.mu
	sessions []*session
	opening  int // sessions being started
	users    int
	idle     *time.Timer
	gone     bool // removed from the pool
}

type session struct {
	conn   *conn
	client *psftp.Client
	users  int
}

// lost reports whether err comes from this connection having ended.
func (c *conn) lost(err error) bool {
	select {
	case <-c.done:
		return true
	default:
	}
	return lostErr(err)
}

// get returns a session to host, connecting when needed; release it after.
func (p *pool) get(ctx context.Context, host string) (*session, error) {
	user, h, port, err := filem.ParseHost(host)
	if err != nil {
		return nil, fmt.Errorf("filem/sftp: %w", err)
	}
	if user == "" {
		user = p.cfg.user
	}
	if port == 0 {
		port = p.cfg.port
	}
	key := filem.JoinHost(user, h, port)
	for {
		p.mu.Lock()
		c := p.conns[key]
		if c == nil {
			c = &conn{key: key, ready: make(chan struct{})}
			p.conns[key] = c
			p.mu.Unlock()
			c.err = p.dial(ctx, c, user, net.JoinHostPort(h, strconv.Itoa(port)))
			close(c.ready)
			if c.err != nil {
				p.drop(c)
				return nil, c.err
			}
			go p.watch(c)
			p.mu.Lock()
		} else {
			p.mu.Unlock()
			select {
			case <-c.ready:
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			if c.err != nil {
				if ctx.Err() == nil && (errors.Is(c.err, context.Canceled) || errors.Is(c.err, context.DeadlineExceeded)) {
					continue // the dialer's own context ended, not ours: dial again
				}
				return nil, c.err
			}
			p.mu.Lock()
		}
		if c.gone {
			p.mu.Unlock()
			continue // ended meanwhile: connect again
		}
		return p.session(c)
	}
}

// session picks the least busy session of c, opening another while there
// are fewer than cfg.sessions and all are busy. Called with p.mu held; it
// releases it, and does not hold it while the server starts a session.
func (p *pool) session(c *conn) (*session, error) {
	c.users++ // counts this caller from now on, so c is not closed as idle
	if c.idle != nil {
		c.idle.Stop()
		c.idle = nil
	}
	best := leastBusy(c.sessions)
	if best != nil && (best.users == 0 || len(c.sessions)+c.opening >= p.cfg.sessions) {
		best.users++
		p.mu.Unlock()
		return best, nil
	}
	c.opening++
	p.mu.Unlock()
	cl, err := p.newClient(c)
	p.mu.Lock()
	defer p.mu.Unlock()
	c.opening--
	switch {
	case err == nil && !c.gone:
		best = &session{conn: c, client: cl}
		c.sessions = append(c.sessions, best)
	case err == nil: // dropped meanwhile
		cl.Close()
		c.users--
		return nil, fmt.Errorf("filem/sftp: connection to %s closed: %w", c.key, filem.ErrUnreachable)
	default:
		best = leastBusy(c.sessions)
		if best == nil {
			c.users--
			return nil, fmt.Errorf("filem/sftp: %s: start the sftp subsystem (is it enabled in the node's sshd_config: Subsystem sftp ...?): %w", c.key, err)
		}
		p.log.Debug("another sftp session refused; sharing one", "host", c.key, "err", err)
	}
	best.users++
	return best, nil
}

func leastBusy(ss []*session) *session {
	var best *session
	for _, s := range ss {
		if best == nil || s.users < best.users {
			best = s
		}
	}
	return best
}

func (p *pool) newClient(c *conn) (*psftp.Client, error) {
	return psftp.NewClient(c.client,
		psftp.MaxPacketUnchecked(p.cfg.maxPacket),
		psftp.MaxConcurrentRequestsPerFile(p.cfg.requests),
		psftp.UseConcurrentWrites(true),
		psftp.UseConcurrentReads(true),
		psftp.UseFstat(true))
}

func (p *pool) release(s *session) {
	p.mu.Lock()
	defer p.mu.Unlock()
	s.users--
	c := s.conn
	c.users--
	if c.users == 0 && !c.gone {
		c.idle = time.AfterFunc(p.cfg.idle, func() {
			p.mu.Lock()
			idle := c.users == 0 && !c.gone
			p.mu.Unlock()
			if idle {
				p.drop(c)
			}
		})
	}
}

// watch drops c from the pool when its connection ends.
func (p *pool) watch(c *conn) {
	c.client.Wait()
	close(c.done)
	p.drop(c)
}

// drop removes c from the pool and closes its connection.
func (p *pool) drop(c *conn) {
	p.mu.Lock()
	if p.conns[c.key] == c {
		delete(p.conns, c.key)
	}
	c.gone = true
	if c.idle != nil {
		c.idle.Stop()
	}
	sessions := c.sessions
	c.sessions = nil
	p.mu.Unlock()
	for _, s := range sessions {
		s.client.Close()
	}
	if c.client != nil {
		c.client.Close()
	}
}

func (p *pool) closeAll() {
	p.mu.Lock()
	var all []*conn
	for _, c := range p.conns {
		all = append(all, c)
	}
	p.mu.Unlock()
	for _, c := range all {
		select {
		case <-c.ready:
			p.drop(c)
		default: // still dialing; its dialer owns it
		}
	}
}

// dial connects and logs in to addr as user, checking the host key.
func (p *pool) dial(ctx context.Context, c *conn, user, addr string) error {
	known, err := p.knownHosts()
	if err != nil {
		return err
	}
	auth, closeAgent, tried, err := p.auth()
	if err != nil {
		return err
	}
	defer closeAgent()
	d := net.Dialer{Timeout: p.cfg.connTimeout, KeepAlive: 30 * time.Second}
	tcp, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("filem/sftp: cannot reach %s: %w: %w", c.key, err, filem.ErrUnreachable)
	}
	// The handshake honours both the connect timeout and ctx.
	tcp.SetDeadline(time.Now().Add(p.cfg.connTimeout))
	stop := context.AfterFunc(ctx, func() { tcp.SetDeadline(time.Unix(1, 0)) })
	var hostErr error
	cfg := &ssh.ClientConfig{
		User: user,
		Auth: auth,
		HostKeyCallback: func(hostname string, remote net.Addr, key ssh.PublicKey) error {
			hostErr = p.checkHostKey(known, hostname, remote, key)
			return hostErr
		},
		HostKeyAlgorithms: knownAlgorithms(known, addr, tcp.RemoteAddr()),
		Timeout:           p.cfg.connTimeout,
	}
	sc, chans, reqs, err := ssh.NewClientConn(tcp, addr, cfg)
	stopped := stop()
	if err != nil {
		tcp.Close()
		switch {
		case hostErr != nil:
			return hostErr
		case !stopped || ctx.Err() != nil:
			return ctx.Err()
		case strings.Contains(err.Error(), "unable to authenticate"):
			return fmt.Errorf("filem/sftp: %s refused the login of %s with %s: %w; add the public key to ~%s/.ssh/authorized_keys on the node, or name the right key in %s",
				c.key, user, tried, err, user, ParamIdentity)
		}
		return fmt.Errorf("filem/sftp: ssh handshake with %s: %w: %w", c.key, err, filem.ErrUnreachable)
	}
	tcp.SetDeadline(time.Time{})
	c.client = ssh.NewClient(sc, chans, reqs)
	c.done = make(chan struct{})
	if p.cfg.keepalive > 0 {
		go keepalive(c.client, p.cfg.keepalive, c.done)
	}
	// One session tells what the server can do; it becomes the first. No
	// one else sees c before ready is closed.
	cl, err := p.newClient(c)
	if err != nil {
		c.client.Close()
		return fmt.Errorf("filem/sftp: %s: start the sftp subsystem (is it enabled in the node's sshd_config: Subsystem sftp ...?): %w", c.key, err)
	}
	s := &session{conn: c, client: cl}
	c.sessions = []*session{s}
	_, c.posixRename = s.client.HasExtension("posix-rename@openssh.com")
	_, c.fsync = s.client.HasExtension("fsync@openssh.com")
	_, c.statvfs = s.client.HasExtension("statvfs@openssh.com")
	p.log.Debug("connected", "host", c.key, "posix-rename", c.posixRename, "fsync", c.fsync)
	return nil
}

// keepalive probes the server every interval and closes the connection
// when a probe goes unanswered for a whole interval, so transfers to a
// node that vanished fail instead of hanging.
func keepalive(c *ssh.Client, every time.Duration, done <-chan struct{}) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-done:
			return
		case <-t.C:
		}
		reply := make(chan error, 1)
		go func() {
			// OpenSSH answers an unknown request with a failure: alive.
			_, _, err := c.SendRequest("keepalive@openssh.com", true, nil)
			reply <- err
		}()
		select {
		case err := <-reply:
			if err != nil {
				c.Close()
				return
			}
		case <-t.C:
			c.Close()
			return
		case <-done:
			return
		}
	}
}

func (p *pool) knownHosts() (ssh.HostKeyCallback, error) {
	f := p.cfg.knownHosts
	if _, err := os.Stat(f); err != nil {
		return nil, fmt.Errorf("filem/sftp: known hosts file %s: %w; the nodes' host keys must be known: collect them with ssh-keyscan (check the fingerprints) into it, or name another file in %s", f, err, ParamKnownHosts)
	}
	cb, err := knownhosts.New(f)
	if err != nil {
		return nil, fmt.Errorf("filem/sftp: read known hosts file %s: %w", f, err)
	}
	return cb, nil
}

func (p *pool) checkHostKey(known ssh.HostKeyCallback, hostname string, remote net.Addr, key ssh.PublicKey) error {
	err := known(hostname, remote, key)
	if err == nil {
		return nil
	}
	host, port, _ := net.SplitHostPort(hostname)
	entry := knownhosts.Normalize(hostname)
	keyscan := "ssh-keyscan " + host
	if port != "22" {
		keyscan = "ssh-keyscan -p " + port + " " + host
	}
	fp := ssh.FingerprintSHA256(key)
	var ke *knownhosts.KeyError
	var re *knownhosts.RevokedError
	switch {
	case errors.As(err, &re):
		return fmt.Errorf("filem/sftp: host key %s of %s is marked revoked in %s; refusing to connect", fp, entry, re.Revoked.Filename)
	case errors.As(err, &ke) && len(ke.Want) == 0:
		return fmt.Errorf("filem/sftp: host %s is not in %s (it offered %s key %s); refusing to connect to an unknown host. Check the fingerprint on the node (ssh-keygen -lf /etc/ssh/ssh_host_%s_key.pub) and add it: %s >> %s",
			entry, p.cfg.knownHosts, key.Type(), fp, keyAlgoName(key.Type()), keyscan, p.cfg.knownHosts)
	case errors.As(err, &ke):
		var was []string
		for _, k := range ke.Want {
			was = append(was, fmt.Sprintf("%s:%d (%s %s)", k.Filename, k.Line, k.Key.Type(), ssh.FingerprintSHA256(k.Key)))
		}
		return fmt.Errorf("filem/sftp: HOST KEY OF %s HAS CHANGED: it offered %s %s, known is %s; refusing to connect (someone may be intercepting the connection). If the node was reinstalled, remove the old key with ssh-keygen -R '%s' -f %s and add the new one after checking it",
			entry, key.Type(), fp, strings.Join(was, ", "), entry, p.cfg.knownHosts)
	}
	return fmt.Errorf("filem/sftp: host key of %s: %w", entry, err)
}

func keyAlgoName(t string) string {
	switch {
	case strings.Contains(t, "ed25519"):
		return "ed25519"
	case strings.Contains(t, "ecdsa"):
		return "ecdsa"
	case strings.Contains(t, "rsa"):
		return "rsa"
	}
	return "*"
}

// probeKey is offered to the known-hosts check to learn which key types
// it knows for a host (never a real host's key).
var probeKey = func() ssh.PublicKey {
	pub, _, _ := ed25519.GenerateKey(nil)
	k, _ := ssh.NewPublicKey(pub)
	return k
}()

// knownAlgorithms returns the host key algorithms to ask the server for:
// those of the keys known for it, so a server with several host keys
// shows the one we can check (as OpenSSH's client does). nil when none is
// known: the handshake then fails on the unknown key, with its message.
func knownAlgorithms(known ssh.HostKeyCallback, addr string, remote net.Addr) []string {
	var ke *knownhosts.KeyError
	if err := known(addr, remote, probeKey); !errors.As(err, &ke) {
		return nil
	}
	var algs []string
	seen := map[string]bool{}
	add := func(a ...string) {
		for _, x := range a {
			if !seen[x] {
				seen[x] = true
				algs = append(algs, x)
			}
		}
	}
	for _, k := range ke.Want {
		switch t := k.Key.Type(); t {
		case ssh.KeyAlgoRSA:
			add(ssh.KeyAlgoRSASHA512, ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSA)
		default:
			add(t)
		}
	}
	return algs
}

// auth gathers the keys to log in with: those of a running ssh-agent and
// the identity files. tried describes them for error messages.
func (p *pool) auth() (methods []ssh.AuthMethod, closeAgent func(), tried string, err error) {
	closeAgent = func() {}
	var signers []ssh.Signer
	var names []string
	var agentSigners func() ([]ssh.Signer, error)
	if sock := os.Getenv("SSH_AUTH_SOCK"); sock != "" {
		if ac, err := net.Dial("unix", sock); err == nil {
			closeAgent = func() { ac.Close() }
			agentSigners = agent.NewClient(ac).Signers
			names = append(names, "the ssh-agent's keys")
		} else {
			p.log.Warn("ssh-agent not reachable; using key files only", "SSH_AUTH_SOCK", sock, "err", err)
		}
	}
	var problems []string
	for _, id := range p.cfg.identities {
		b, err := os.ReadFile(id)
		if err != nil {
			if !os.IsNotExist(err) {
				problems = append(problems, err.Error())
			}
			continue
		}
		s, err := ssh.ParsePrivateKey(b)
		var pm *ssh.PassphraseMissingError
		switch {
		case errors.As(err, &pm):
			problems = append(problems, fmt.Sprintf("%s is protected by a passphrase: load it into ssh-agent (ssh-add %s)", id, id))
			continue
		case err != nil:
			problems = append(problems, fmt.Sprintf("%s: %v", id, err))
			continue
		}
		signers = append(signers, s)
		names = append(names, id)
	}
	if agentSigners == nil && len(signers) == 0 {
		closeAgent()
		msg := "no key to log in with: none of " + strings.Join(p.cfg.identities, ", ") + " exists and no ssh-agent runs (SSH_AUTH_SOCK)"
		if len(problems) > 0 {
			msg = "no usable key to log in with: " + strings.Join(problems, "; ")
		}
		return nil, nil, "", fmt.Errorf("filem/sftp: %s; create one with ssh-keygen -t ed25519 or name yours in %s", msg, ParamIdentity)
	}
	for _, pr := range problems {
		p.log.Warn("identity skipped", "problem", pr)
	}
	cb := func() ([]ssh.Signer, error) {
		all := []ssh.Signer{}
		if agentSigners != nil {
			if as, err := agentSigners(); err == nil {
				all = append(all, as...)
			}
		}
		return append(all, signers...), nil
	}
	return []ssh.AuthMethod{ssh.PublicKeysCallback(cb)}, closeAgent, strings.Join(names, ", "), nil
}
