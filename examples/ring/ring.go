package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"time"

	"gompi/cr"
	"gompi/mpi"
)

func run(p *mpi.Proc, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("ring", flag.ContinueOnError)
	fs.SetOutput(out)
	size := fs.Int("size", 8<<10, "message size in bytes")
	steps := fs.Int("steps", 10, "laps around the ring")
	sleep := fs.Duration("sleep", 0, "pause between laps (for demos)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *size < 0 || *steps < 0 {
		return fmt.Errorf("-size and -steps must be >= 0")
	}
	w := p.World()
	n, r := w.Size(), w.Rank()
	next, prev := (r+1)%n, (r-1+n)%n
	msg := make([]byte, *size)
	buf := make([]byte, *size)
	if r == 0 {
		fmt.Fprintf(out, "ring: %d ranks, %d-byte message, transport to rank %d: %s\n", n, *size, next, p.Transport(next))
	}
	// Checkpoint/restart: at the top of a lap no message is in flight;
	// the lap number and the last message received are the progress.
	step := 1
	c, err := cr.For(p)
	if err != nil {
		return err
	}
	if err := c.Protect("step", &step); err != nil {
		return err
	}
	if err := c.Protect("buf", &buf); err != nil {
		return err
	}
	if len(buf) != *size {
		return fmt.Errorf("restart: the saved message has %d bytes, -size is %d: restart with the checkpointed run's -size", len(buf), *size)
	}
	for ; step <= *steps; step++ {
		if err := c.SafePoint(); err != nil {
			return err
		}
		if r == 0 {
			for i := range msg {
				msg[i] = byte(step + i)
			}
			start := time.Now()
			if err := w.Send(msg, next, step); err != nil {
				return err
			}
			st, err := w.Recv(buf, prev, step)
			if err != nil {
				return err
			}
			lap := time.Since(start)
			if st.Count != *size || !bytes.Equal(buf, msg) {
				return fmt.Errorf("lap %d: the message came back changed", step)
			}
			fmt.Fprintf(out, "step %d: lap %.1f us, %.1f us per hop\n", step, us(lap), us(lap)/float64(n))
		} else {
			if _, err := w.Recv(buf, prev, step); err != nil {
				return err
			}
			if err := w.Send(buf, next, step); err != nil {
				return err
			}
		}
		if *sleep > 0 {
			time.Sleep(*sleep)
		}
	}
	return nil
}

func us(d time.Duration) float64 { return float64(d.Nanoseconds()) / 1e3 }
