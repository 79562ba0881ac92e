package mca

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
)

// Provisioner is implemented by a module that needs more than its
// parameters to work: the host it runs in (see the package doc, "The life
// of a module"). Each framework defines its host type H; a module
// implements Provisioner[thatframework.Host].
type Provisioner[H any] interface {
	// Provision gives the module its host. It is called after selection
	// and before any other method of the module, by the process's
	// assembly (package boot) or, where the host exists only later, by
	// the consumer the framework's doc names.
	Provision(ctx context.Context, host H) error
}

// Provision gives m its host when m takes one of type H. It reports
// whether m did: a module that does not implement Provisioner[H] needs
// no host, which is no error.
func Provision[H any](ctx context.Context, m any, host H) (bool, error) {
	p, ok := m.(Provisioner[H])
	if !ok {
		return false, nil
	}
	return true, p.Provision(ctx, host)
}

// Close ends a module's life when it holds resources (it implements
// io.Closer: connections, goroutines, plugin clients).
func Close(m any) error {
	if c, ok := m.(io.Closer); ok {
		return c.Close()
	}
	return nil
}

// Closers closes what a process assembled, last first, once: the one
// Close of a role's module set. The zero value is ready to use.
type Closers struct {
	mu  sync.Mutex
	fns []func() error
}

// Module adds a selected module; Close closes it when it implements
// io.Closer. name says which, in errors.
func (c *Closers) Module(name string, m any) {
	c.Add(func() error {
		if err := Close(m); err != nil {
			return fmt.Errorf("close %s: %w", name, err)
		}
		return nil
	})
}

// Add adds a function run by Close.
func (c *Closers) Add(f func() error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.fns = append(c.fns, f)
}

// Close runs what was added, last first, and joins the errors. Later
// calls do nothing.
func (c *Closers) Close() error {
	c.mu.Lock()
	fns := c.fns
	c.fns = nil
	c.mu.Unlock()
	var errs []error
	for i := len(fns) - 1; i >= 0; i-- {
		errs = append(errs, fns[i]())
	}
	return errors.Join(errs...)
}
