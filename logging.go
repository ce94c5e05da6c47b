package riffle

import (
	"context"
	"log/slog"
	"slices"
)

// defaultLogHandler is the handler of a client without a Logger: warnings
// and errors go to slog.Default() (read at each record, so a later
// slog.SetDefault is followed), everything below is dropped. A client
// that stops a partition, warns about clear-text credentials or cannot
// refresh metadata is then never silent, while routine events cost
// nothing.
type defaultLogHandler struct {
	// wrap replays WithAttrs and WithGroup on the default handler.
	wrap []func(slog.Handler) slog.Handler
}

func (h defaultLogHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && slog.Default().Handler().Enabled(ctx, l)
}

func (h defaultLogHandler) Handle(ctx context.Context, r slog.Record) error {
	dh := slog.Default().Handler()
	for _, w := range h.wrap {
		dh = w(dh)
	}
	return dh.Handle(ctx, r)
}

func (h defaultLogHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return defaultLogHandler{wrap: append(slices.Clip(h.wrap), func(d slog.Handler) slog.Handler { return d.WithAttrs(as) })}
}

func (h defaultLogHandler) WithGroup(name string) slog.Handler {
	return defaultLogHandler{wrap: append(slices.Clip(h.wrap), func(d slog.Handler) slog.Handler { return d.WithGroup(name) })}
}
