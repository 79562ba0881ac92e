package plugin

import (
	"context"
	"io"
	"log"
	"log/slog"

	"github.com/hashicorp/go-hclog"
)

// envLogLevel carries the host's log level to a plugin, so a plugin does
// not produce records the host would drop anyway.
const envLogLevel = "GOMPI_PLUGIN_LOG_LEVEL"

// hostLevel is the hclog level matching what log lets through.
func hostLevel(l *slog.Logger) hclog.Level {
	ctx := context.Background()
	switch {
	case l.Enabled(ctx, slog.LevelDebug):
		return hclog.Debug
	case l.Enabled(ctx, slog.LevelInfo):
		return hclog.Info
	case l.Enabled(ctx, slog.LevelWarn):
		return hclog.Warn
	default:
		return hclog.Error
	}
}

func slogLevel(l hclog.Level) slog.Level {
	switch l {
	case hclog.Trace, hclog.Debug:
		return slog.LevelDebug
	case hclog.Info, hclog.NoLevel:
		return slog.LevelInfo
	case hclog.Warn:
		return slog.LevelWarn
	default:
		return slog.LevelError
	}
}

// hclogToSlog is the hclog.Logger go-plugin logs through on the host. The
// plugin's own records (go-plugin relays them through a logger named after
// the plugin binary) keep their level; go-plugin's chatter about starting
// and stopping processes is demoted to debug, since the host reports those
// events itself as errors.
type hclogToSlog struct {
	log        *slog.Logger
	name       string
	pluginName string
	own        bool // records of the plugin itself
	level      *hclog.Level
	implied    []any
}

func newHCLogToSlog(l *slog.Logger, pluginName string) hclog.Logger {
	lvl := hostLevel(l)
	return &hclogToSlog{log: l, pluginName: pluginName, level: &lvl}
}

func (h *hclogToSlog) Log(level hclog.Level, msg string, args ...any) {
	if level == hclog.Off || (level != hclog.NoLevel && level < *h.level) {
		return
	}
	sl := slog.LevelDebug
	if h.own {
		sl = slogLevel(level)
		args = dropKey(args, "timestamp") // go-plugin's copy of the record's time
	}
	h.log.Log(context.Background(), sl, msg, args...)
}

func dropKey(args []any, key string) []any {
	for i := 0; i+1 < len(args); i += 2 {
		if k, ok := args[i].(string); ok && k == key {
			return append(append([]any(nil), args[:i]...), args[i+2:]...)
		}
	}
	return args
}

func (h *hclogToSlog) Trace(msg string, args ...any) { h.Log(hclog.Trace, msg, args...) }
func (h *hclogToSlog) Debug(msg string, args ...any) { h.Log(hclog.Debug, msg, args...) }
func (h *hclogToSlog) Info(msg string, args ...any)  { h.Log(hclog.Info, msg, args...) }
func (h *hclogToSlog) Warn(msg string, args ...any)  { h.Log(hclog.Warn, msg, args...) }
func (h *hclogToSlog) Error(msg string, args ...any) { h.Log(hclog.Error, msg, args...) }
func (h *hclogToSlog) IsTrace() bool                 { return *h.level <= hclog.Trace }
func (h *hclogToSlog) IsDebug() bool                 { return *h.level <= hclog.Debug }
func (h *hclogToSlog) IsInfo() bool                  { return *h.level <= hclog.Info }
func (h *hclogToSlog) IsWarn() bool                  { return *h.level <= hclog.Warn }
func (h *hclogToSlog) IsError() bool                 { return *h.level <= hclog.Error }
func (h *hclogToSlog) ImpliedArgs() []any            { return h.implied }
func (h *hclogToSlog) Name() string                  { return h.name }
func (h *hclogToSlog) SetLevel(l hclog.Level)        { *h.level = l }
func (h *hclogToSlog) GetLevel() hclog.Level         { return *h.level }

func (h *hclogToSlog) With(args ...any) hclog.Logger {
	c := *h
	c.log = h.log.With(args...)
	c.implied = append(append([]any(nil), h.implied...), args...)
	return &c
}

func (h *hclogToSlog) Named(name string) hclog.Logger {
	c := *h
	if h.name != "" {
		c.name = h.name + "." + name
	} else {
		c.name = name
	}
	c.own = h.own || name == h.pluginName
	return &c
}

func (h *hclogToSlog) ResetNamed(name string) hclog.Logger {
	c := *h
	c.name = name
	c.own = name == h.pluginName
	return &c
}

func (h *hclogToSlog) StandardLogger(*hclog.StandardLoggerOptions) *log.Logger {
	return slog.NewLogLogger(h.log.Handler(), slog.LevelDebug)
}

func (h *hclogToSlog) StandardWriter(o *hclog.StandardLoggerOptions) io.Writer {
	return h.StandardLogger(o).Writer()
}

// slogToHCLog is the slog.Handler components log through inside a plugin:
// records become hclog JSON lines on the plugin's stderr, which go-plugin
// relays to the host at their level.
type slogToHCLog struct {
	l      hclog.Logger
	attrs  []any
	prefix string
}

func (h *slogToHCLog) Enabled(_ context.Context, l slog.Level) bool {
	return hclogLevel(l) >= h.l.GetLevel()
}

func hclogLevel(l slog.Level) hclog.Level {
	switch {
	case l < slog.LevelInfo:
		return hclog.Debug
	case l < slog.LevelWarn:
		return hclog.Info
	case l < slog.LevelError:
		return hclog.Warn
	default:
		return hclog.Error
	}
}

func (h *slogToHCLog) Handle(_ context.Context, r slog.Record) error {
	args := append([]any(nil), h.attrs...)
	r.Attrs(func(a slog.Attr) bool {
		args = appendAttr(args, h.prefix, a)
		return true
	})
	h.l.Log(hclogLevel(r.Level), r.Message, args...)
	return nil
}

func appendAttr(args []any, prefix string, a slog.Attr) []any {
	v := a.Value.Resolve()
	if v.Kind() == slog.KindGroup {
		p := prefix
		if a.Key != "" {
			p = prefix + a.Key + "."
		}
		for _, g := range v.Group() {
			args = appendAttr(args, p, g)
		}
		return args
	}
	if a.Key == "" {
		return args
	}
	val := v.Any()
	if err, ok := val.(error); ok {
		val = err.Error()
	}
	return append(args, prefix+a.Key, val)
}

func (h *slogToHCLog) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append([]any(nil), h.attrs...)
	for _, a := range as {
		c.attrs = appendAttr(c.attrs, h.prefix, a)
	}
	return &c
}

func (h *slogToHCLog) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.prefix = h.prefix + name + "."
	return &c
}

var (
	_ hclog.Logger = (*hclogToSlog)(nil)
	_ slog.Handler = (*slogToHCLog)(nil)
)
