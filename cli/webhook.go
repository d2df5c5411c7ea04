package cli

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"go.opentelemetry.io/otel/propagation"

	"github.com/backlogq/backlog/adapters/webhook"
	"github.com/backlogq/backlog/core"
)

// Webhook handlers: a handler whose command is an http:// or https:// URL
// (--handler KIND=https://host/path, or "command" in the config file)
// POSTs each job to that URL (adapters/webhook). See docs/webhooks.md.

// webhookFlags are the flags of work/serve for webhook handlers.
type webhookFlags struct {
	secret     string
	secretFile string
	allowHosts []string
	timeout    time.Duration
}

// fileWebhooks is the config file's "webhooks" section. Flags add to
// allow_hosts and override the rest.
type fileWebhooks struct {
	AllowHosts []string `json:"allow_hosts"`
	// SecretFile names a file whose first line is the signing secret
	// (the secret itself never goes into the config file).
	SecretFile       string    `json:"secret_file"`
	Timeout          *duration `json:"timeout"`
	MaxResponseBytes int       `json:"max_response_bytes"`
	MaxSnooze        *duration `json:"max_snooze"`
}

// Environment variables of the webhook secret, read when the flags are
// not given.
const (
	webhookSecretEnv     = "BACKLOG_WEBHOOK_SECRET"
	webhookSecretFileEnv = "BACKLOG_WEBHOOK_SECRET_FILE"
)

func (w *webhookFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&w.secret, "webhook-secret", "", "secret (at least 16 bytes) that signs webhook handlers' requests (env "+webhookSecretEnv+"; prefer the environment or a file: flags show in ps)")
	fl.StringVar(&w.secretFile, "webhook-secret-file", "", "file whose first line is the webhook signing secret (env "+webhookSecretFileEnv+")")
	fl.StringArrayVar(&w.allowHosts, "webhook-allow-host", nil, "HOST[:PORT], IP[:PORT] or IP/BITS a webhook handler may reach (repeatable); URLs, redirects and resolved addresses elsewhere are refused")
	fl.DurationVar(&w.timeout, "webhook-timeout", webhook.DefaultTimeout, "time limit of one webhook request (the attempt's timeout and the job's deadline bound it too)")
}

// webhookURL returns the URL of a handler command that is one: a string
// command (sh -c) or a one-element argv starting with http:// or https://.
func webhookURL(argv []string) (string, bool) {
	var s string
	switch {
	case len(argv) == 3 && argv[0] == "sh" && argv[1] == "-c":
		s = argv[2]
	case len(argv) == 1:
		s = argv[0]
	default:
		return "", false
	}
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "http://") || strings.HasPrefix(s, "https://") {
		return s, true
	}
	return "", false
}

// webhookKinds returns the kinds of wc whose handler is a webhook, sorted.
func webhookKinds(wc *workConfig) []string {
	var out []string
	for kind, hc := range wc.handlers {
		if _, ok := webhookURL(hc.argv); ok {
			out = append(out, kind)
		}
	}
	slices.Sort(out)
	return out
}

// resolve turns every handler whose command is a URL into a webhook
// handler (handlerConfig.webhook). It refuses, as usage errors, a URL
// whose host is not allowed, a missing or short secret, and webhook
// settings without any webhook handler to use them.
func (w *webhookFlags) resolve(fl *pflag.FlagSet, wc *workConfig, getenv func(string) string) error {
	kinds := webhookKinds(wc)
	file := wc.webhookFile
	if file == nil {
		file = &fileWebhooks{}
	}
	if len(kinds) == 0 {
		for _, name := range []string{"webhook-secret", "webhook-secret-file", "webhook-allow-host", "webhook-timeout"} {
			if fl.Changed(name) {
				return usagef("--%s is given but no handler is a webhook (--handler KIND=https://host/path)", name)
			}
		}
		return nil
	}
	if getenv == nil {
		getenv = func(string) string { return "" }
	}
	secret, err := w.readSecret(fl, file, getenv)
	if err != nil {
		return err
	}
	cfg := webhook.Config{
		Secret:           secret,
		AllowHosts:       append(slices.Clone(file.AllowHosts), w.allowHosts...),
		Timeout:          webhook.DefaultTimeout,
		MaxResponseBytes: file.MaxResponseBytes,
		InjectTrace:      injectTrace,
	}
	if file.Timeout != nil {
		cfg.Timeout = time.Duration(*file.Timeout)
	}
	if fl.Changed("webhook-timeout") {
		cfg.Timeout = w.timeout
	}
	if file.MaxSnooze != nil {
		cfg.MaxSnooze = time.Duration(*file.MaxSnooze)
	}
	switch {
	case cfg.Timeout <= 0:
		return usagef("--webhook-timeout must be positive")
	case cfg.MaxResponseBytes < 0 || cfg.MaxSnooze < 0:
		return usagef("config: webhooks: max_response_bytes and max_snooze must not be negative")
	case len(cfg.AllowHosts) == 0:
		return usagef("webhook handlers (%s) need their hosts allowed: give --webhook-allow-host HOST[:PORT] (repeatable) or webhooks.allow_hosts in the config file", strings.Join(kinds, ", "))
	}
	sender, err := webhook.NewSender(cfg)
	if err != nil {
		return usageError{err}
	}
	for _, kind := range kinds {
		hc := wc.handlers[kind]
		target, _ := webhookURL(hc.argv)
		h, err := sender.Handler(target)
		if err != nil {
			return usagef("handler %q: %v (allow its host with --webhook-allow-host)", kind, err)
		}
		hc.webhook = h.Handle
	}
	return nil
}

// readSecret returns the signing secret: --webhook-secret, else
// --webhook-secret-file, else the environment's, else the config file's
// secret_file.
func (w *webhookFlags) readSecret(fl *pflag.FlagSet, file *fileWebhooks, getenv func(string) string) ([]byte, error) {
	secret, path := w.secret, w.secretFile
	if !fl.Changed("webhook-secret") {
		secret = getenv(webhookSecretEnv)
	}
	if !fl.Changed("webhook-secret-file") {
		path = getenv(webhookSecretFileEnv)
	}
	if path == "" {
		path = file.SecretFile
	}
	switch {
	case secret != "" && fl.Changed("webhook-secret-file"):
		return nil, usagef("--webhook-secret and --webhook-secret-file both given; use one")
	case secret != "":
	case path != "":
		lines, err := readLines(path)
		if err != nil {
			return nil, usagef("webhook secret file: %v", err)
		}
		if len(lines) == 0 {
			return nil, usagef("webhook secret file %s is empty", path)
		}
		secret = lines[0]
	default:
		return nil, usagef("webhook handlers sign their requests: give the secret in %s, --webhook-secret-file or webhooks.secret_file (at least %d bytes)", webhookSecretEnv, webhook.MinSecretLen)
	}
	if len(secret) < webhook.MinSecretLen {
		return nil, usagef("the webhook secret is %d bytes; it must have at least %d", len(secret), webhook.MinSecretLen)
	}
	return []byte(secret), nil
}

// injectTrace writes the attempt's trace context (the engine's process
// span, when tracing is on) into a webhook request's headers with W3C
// Trace Context, the propagator the engine uses when none is configured
// (as the CLI does). Without tracing it writes nothing and the job's own
// trace context is forwarded.
func injectTrace(ctx context.Context, h http.Header, _ *core.Job) {
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
}

// refuseWebhooks is the check of runners that cannot run webhook
// handlers.
func refuseWebhooks(wc *workConfig, where string) error {
	if kinds := webhookKinds(wc); len(kinds) > 0 {
		return usagef("webhook handlers (%s) do not run %s: run them with backlog work or serve over the database", strings.Join(kinds, ", "), where)
	}
	return nil
}
