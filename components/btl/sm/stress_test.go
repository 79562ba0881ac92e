package sm

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"gompi/frameworks/btl"
	"gompi/frameworks/btl/btltest"
	"gompi/mca"
)

// The stress tests run the other end of a connection in a child process
// (this test binary, re-executed): the race detector cannot see memory
// shared between processes, so these tests are what proves the rings.
// GOMPI_SM_STRESS sets the message count of each case (default below).
const (
	envRole   = "GOMPI_SM_STRESS_ROLE"
	envAddr   = "GOMPI_SM_STRESS_ADDR"
	envCase   = "GOMPI_SM_STRESS_CASE"
	envCount  = "GOMPI_SM_STRESS"
	stressJob = "sm-stress"
)

// stressCase is one configuration of the writer and the reader.
type stressCase struct {
	name  string
	mode  string // btl_sm_single_copy
	ring  string // btl_sm_ring: small rings wrap often and fill up
	poll  bool   // poll, or sleep at once (every wait takes the doorbell path)
	share int    // per mille of the message count
}

var stressCases = []stressCase{
	{"cma-poll", copyCMA, "64KiB", true, 450},
	{"ring-poll-4KiB", copyNone, "4KiB", true, 450},
	{"ring-sleep", copyNone, "8KiB", false, 50},
	{"cma-sleep", copyCMA, "16KiB", false, 50},
}

func (c stressCase) settings() []mca.Setting {
	s := []mca.Setting{{Name: paramSingle, Value: c.mode}, {Name: paramRing, Value: c.ring}, {Name: paramCMAMin, Value: "8KiB"}}
	if !c.poll {
		s = append(s, mca.Setting{Name: paramPoll, Value: "0"})
	}
	return s
}

func caseNamed(name string) stressCase {
	for _, c := range stressCases {
		if c.name == name {
			return c
		}
	}
	panic("no stress case " + name)
}

// noise is the payloads' source: frame i carries noise[i%251:][:size].
var noise = func() []byte {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, 1<<20+256)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}()

// size draws frame sizes: mostly small, some of a few small rings'
// sizes, a few large (single copy when allowed), a very few of 1 MiB at
// most.
func size(r *rand.Rand) int {
	switch x := r.IntN(10000); {
	case x < 9000:
		return r.IntN(200)
	case x < 9900:
		return r.IntN(16 << 10)
	case x < 9995:
		return r.IntN(128 << 10)
	default:
		return r.IntN(1 << 20)
	}
}

func count(t *testing.T) int {
	n := 1_000_000
	if s := os.Getenv(envCount); s != "" {
		var err error
		if n, err = strconv.Atoi(s); err != nil {
			t.Fatalf("%s=%q: %v", envCount, s, err)
		}
	}
	if testing.Short() || raceOn {
		n /= 20
	}
	return n
}

// child starts this test binary as the other end, in role, dialing addr.
func child(t *testing.T, role, addr string, c stressCase, n int) (*exec.Cmd, *bufio.Scanner) {
	t.Helper()
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), envRole+"="+role, envAddr+"="+addr, envCase+"="+c.name, envCount+"="+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, bufio.NewScanner(out)
}

// listen makes a module of case c listening, and returns it, its address
// and its accepted connections.
func listen(t *testing.T, c stressCase) (btl.Module, string, chan btl.Conn) {
	t.Helper()
	m := btltest.Module(t, New(), c.settings()...)
	accepted := make(chan btl.Conn, 1)
	addr, err := m.Listen(t.Context(), btl.Endpoint{Job: stressJob, Rank: 0, Node: "n"}, func(k btl.Conn) { accepted <- k })
	if err != nil {
		t.Fatal(err)
	}
	return m, addr, accepted
}

func always() bool { return true }

func take(t *testing.T, accepted chan btl.Conn, c stressCase) btl.Conn {
	t.Helper()
	select {
	case k := <-accepted:
		if c.poll {
			k.(btl.Poller).SetPoll(always, always)
		}
		return k
	case <-time.After(time.Minute):
		t.Fatal("the child did not connect")
		return nil
	}
}

// TestStress: a child writes millions of frames of random sizes, which
// this process reads and checks (consuming payloads in random pieces and
// discards), in each case.
func TestStress(t *testing.T) {
	total := count(t)
	for _, c := range stressCases {
		t.Run(c.name, func(t *testing.T) {
			n := max(1, total*c.share/1000)
			_, addr, accepted := listen(t, c)
			cmd, _ := child(t, "writer", addr, c, n)
			k := take(t, accepted, c)
			defer k.Close()
			begin := time.Now()
			if err := readAll(k, n); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("writer: %v", err)
			}
			kc := k.(*conn)
			if cma := kc.in.ackCount(); (c.mode == copyCMA) != (cma > 0) {
				t.Errorf("%d frames copied once with %s=%s", cma, paramSingle, c.mode)
			}
			t.Logf("%d frames in %v", n, time.Since(begin).Round(time.Millisecond))
		})
	}
}

func (r *ring) ackCount() uint64 { return *r.ack }

// readAll reads and checks the n frames of writeAll, then io.EOF.
func readAll(k btl.Conn, n int) error {
	r := rand.New(rand.NewPCG(7, 7))
	pick := rand.New(rand.NewPCG(8, 8))
	hdr := make([]byte, btl.MaxHeader)
	buf := make([]byte, 1<<20)
	for i := range n {
		want := size(r)
		hn, pn, err := k.ReadHeader(hdr)
		if err != nil {
			return fmt.Errorf("frame %d: %w", i, err)
		}
		if hn != 8+i%50 || binary.LittleEndian.Uint64(hdr) != uint64(i) || pn != want {
			return fmt.Errorf("frame %d: header %x (%d bytes), payload %d bytes, want %d", i, hdr[:hn], hn, pn, want)
		}
		src := noise[i%251:][:pn]
		for off := 0; off < pn; {
			m := pn - off
			if pick.IntN(4) == 0 {
				m = 1 + pick.IntN(m)
			}
			if pick.IntN(8) == 0 {
				if err := k.Discard(m); err != nil {
					return fmt.Errorf("frame %d: discard: %w", i, err)
				}
			} else {
				if err := k.ReadPayload(buf[:m]); err != nil {
					return fmt.Errorf("frame %d: payload: %w", i, err)
				}
				if !bytes.Equal(buf[:m], src[off:off+m]) {
					return fmt.Errorf("frame %d: payload bytes %d-%d differ", i, off, off+m)
				}
			}
			off += m
		}
	}
	if _, _, err := k.ReadHeader(hdr); !errors.Is(err, io.EOF) {
		return fmt.Errorf("after the last frame: %v, want io.EOF", err)
	}
	return nil
}

// writeAll writes n frames of random sizes, then closes the writing half.
func writeAll(k btl.Conn, n int) error {
	r := rand.New(rand.NewPCG(7, 7))
	hdr := make([]byte, btl.MaxHeader)
	for i := range n {
		binary.LittleEndian.PutUint64(hdr, uint64(i))
		if err := k.WriteFrame(hdr[:8+i%50], noise[i%251:][:size(r)]); err != nil {
			return fmt.Errorf("frame %d: %w", i, err)
		}
	}
	return k.CloseWrite()
}

// TestMain runs the package's tests, or, in a process a stress test
// started (its role in the environment), that process's end of the
// connection: a child is no test of its own, so nothing is skipped.
func TestMain(m *testing.M) {
	if role := os.Getenv(envRole); role != "" {
		if err := stressChild(role); err != nil {
			fmt.Fprintln(os.Stderr, "stress child:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// stressChild dials the parent's address and plays role: write every
// frame, or stop in the middle of one until it is killed.
func stressChild(role string) error {
	c := caseNamed(os.Getenv(envCase))
	n, err := strconv.Atoi(os.Getenv(envCount))
	if err != nil {
		return fmt.Errorf("%s: %w", envCount, err)
	}
	m, err := btltest.NewModule(New(), c.settings()...)
	if err != nil {
		return err
	}
	defer m.Close()
	k, err := m.Dial(context.Background(), btl.Endpoint{Job: stressJob, Rank: 1, Node: "n"}, btl.Endpoint{Job: stressJob, Node: "n", Addr: os.Getenv(envAddr)})
	if err != nil {
		return err
	}
	defer k.Close()
	if c.poll {
		k.(btl.Poller).SetPoll(always, always)
	}
	switch role {
	case "writer":
		return writeAll(k, n)
	case "stuck-writer":
		// One frame larger than the ring: the write waits for room (or
		// for the reader's copy) until this process is killed.
		fmt.Println("writing")
		return k.WriteFrame([]byte("big"), noise[:1<<20])
	case "stuck-reader":
		hdr := make([]byte, btl.MaxHeader)
		_, pn, err := k.ReadHeader(hdr)
		if err == nil {
			err = k.ReadPayload(make([]byte, pn/2))
		}
		if err != nil {
			return err
		}
		fmt.Println("mid-message")
		select {} // killed here
	}
	return fmt.Errorf("unknown role %q", role)
}

// TestKilledMidMessage kills the other process in the middle of a frame:
// a writer gets an error (never hangs) when its reader dies, and a reader
// gets io.ErrUnexpectedEOF when its writer dies; neither leaves a
// mapping behind once it closes.
func TestKilledMidMessage(t *testing.T) {
	for _, c := range stressCases {
		t.Run(c.name, func(t *testing.T) {
			t.Run("reader killed", func(t *testing.T) { readerKilled(t, c) })
			t.Run("writer killed", func(t *testing.T) { writerKilled(t, c) })
		})
	}
}

func readerKilled(t *testing.T, c stressCase) {
	_, addr, accepted := listen(t, c)
	cmd, out := child(t, "stuck-reader", addr, c, 0)
	k := take(t, accepted, c)
	res := make(chan error, 1)
	go func() { res <- k.WriteFrame([]byte("big"), noise[:1<<20]) }()
	if !out.Scan() || out.Text() != "mid-message" {
		t.Fatalf("child said %q", out.Text())
	}
	cmd.Process.Signal(syscall.SIGKILL)
	select {
	case err := <-res:
		if err == nil {
			t.Fatal("a write to a reader killed in the middle of it succeeded")
		}
		if !errors.Is(err, syscall.EPIPE) {
			t.Errorf("write: %v, want EPIPE", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("the write hangs after its reader was killed")
	}
	k.Close()
	if n := smMappings(t); n != 0 {
		t.Errorf("%d segment mappings after close", n)
	}
}

func writerKilled(t *testing.T, c stressCase) {
	_, addr, accepted := listen(t, c)
	cmd, out := child(t, "stuck-writer", addr, c, 0)
	k := take(t, accepted, c)
	defer k.Close()
	if !out.Scan() || out.Text() != "writing" {
		t.Fatalf("child said %q", out.Text())
	}
	hdr := make([]byte, btl.MaxHeader)
	_, pn, err := k.ReadHeader(hdr)
	if err != nil || pn != 1<<20 {
		t.Fatalf("read header: %d bytes, %v", pn, err)
	}
	if c.mode == copyCMA {
		// The payload is in the writer: copy a part of it, then kill.
		if err := k.ReadPayload(make([]byte, 4096)); err != nil {
			t.Fatal(err)
		}
	}
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	err = k.ReadPayload(make([]byte, pn-4096))
	if c.mode == copyCMA {
		// The writer's memory is gone: the copy fails.
		if err == nil {
			t.Fatal("a copy from a killed writer succeeded")
		}
	} else if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("payload of a killed writer: %v, want io.ErrUnexpectedEOF", err)
	}
	if strings.Contains(fmt.Sprint(err), "closed") {
		t.Errorf("error %v", err)
	}
}
