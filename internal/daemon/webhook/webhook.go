package webhook

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/execbox/execbox/event"
)

// Headers of a delivery. The signature is "sha256=" and the hex HMAC-SHA256,
// keyed by the secret, of the timestamp header's value, a ".", and the body:
// a receiver recomputes it, compares in constant time and refuses a
// timestamp too old (a replay).
const (
	HeaderEvent     = "X-Execbox-Event"
	HeaderDelivery  = "X-Execbox-Delivery" // the event's seq
	HeaderTimestamp = "X-Execbox-Timestamp"
	HeaderSignature = "X-Execbox-Signature"
)

// Delivery results (Options.OnResult).
const (
	Delivered = "delivered"
	Rejected  = "rejected"
	Failed    = "failed"
)

// Options configure a Sender.
type Options struct {
	URL    string
	Secret []byte
	// Timeout bounds one POST (default 5 s); Retries how many times a
	// failed one is tried again (default 3; -1 none), after Backoff (default
	// 500 ms), doubling.
	Timeout time.Duration
	Retries int
	Backoff time.Duration
	// Queue is how many events may wait (default 1024); more are dropped.
	Queue int
	// Filter, when set, picks the events sent.
	Filter   func(*event.Event) bool
	Logger   *slog.Logger
	OnResult func(result string)
	// Client is for tests; by default one that follows no redirect.
	Client *http.Client
}

// Sender delivers a bus's events to the webhook until Close.
type Sender struct {
	o    Options
	sub  *event.Subscription
	stop chan struct{}
	done chan struct{}
	once sync.Once
}

// Sign returns the signature header's value for body sent at ts.
func Sign(secret []byte, ts string, body []byte) string {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return "sha256=" + hex.EncodeToString(m.Sum(nil))
}

// CheckURL says whether s can be a webhook's URL: http or https, a host,
// no credentials.
func CheckURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil {
		return fmt.Errorf("webhook URL %q: want http(s)://host[:port]/path, without credentials", s)
	}
	return nil
}

// Check validates o's URL and secret.
func (o Options) Check() error {
	if err := CheckURL(o.URL); err != nil {
		return err
	}
	if len(o.Secret) < 16 {
		return errors.New("webhook secret: at least 16 bytes")
	}
	return nil
}

// Start subscribes to bus and delivers its events in order, one at a time.
func Start(bus *event.Bus, o Options) (*Sender, error) {
	if err := o.Check(); err != nil {
		return nil, err
	}
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.Retries == 0 {
		o.Retries = 3
	}
	if o.Backoff <= 0 {
		o.Backoff = 500 * time.Millisecond
	}
	if o.Queue <= 0 {
		o.Queue = 1024
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.OnResult == nil {
		o.OnResult = func(string) {}
	}
	if o.Client == nil {
		o.Client = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	s := &Sender{o: o, sub: bus.Subscribe("webhook", o.Queue, o.Filter), stop: make(chan struct{}), done: make(chan struct{})}
	go s.loop()
	return s, nil
}

func (s *Sender) loop() {
	defer close(s.done)
	for e := range s.sub.C() {
		s.deliver(e)
	}
}

// deliver POSTs e until it is taken, refused, or the retries are spent.
func (s *Sender) deliver(e event.Event) {
	body, err := json.Marshal(e)
	if err != nil {
		s.o.OnResult(Failed)
		return
	}
	wait := s.o.Backoff
	for try := 0; ; try++ {
		status, err := s.post(e, body)
		switch {
		case err == nil && status/100 == 2:
			s.o.OnResult(Delivered)
			return
		case err == nil && status != http.StatusTooManyRequests && status < 500:
			s.o.Logger.Warn("the webhook refused an event", "status", status, "seq", e.Seq, "type", e.Type)
			s.o.OnResult(Rejected)
			return
		}
		if try >= max(s.o.Retries, 0) {
			s.o.Logger.Warn("delivering an event to the webhook failed", "seq", e.Seq, "type", e.Type, "status", status, "err", err, "tries", try+1)
			s.o.OnResult(Failed)
			return
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-s.stop:
			t.Stop()
			s.o.OnResult(Failed)
			return
		}
		wait *= 2
	}
}

func (s *Sender) post(e event.Event, body []byte) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.o.Timeout)
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.o.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err
	}
	ts := strconv.FormatInt(time.Now().Unix(), 10)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "execbox-webhook")
	req.Header.Set(HeaderEvent, e.Type)
	req.Header.Set(HeaderDelivery, strconv.FormatUint(e.Seq, 10))
	req.Header.Set(HeaderTimestamp, ts)
	req.Header.Set(HeaderSignature, Sign(s.o.Secret, ts, body))
	resp, err := s.o.Client.Do(req)
	if err != nil {
		return 0, err
	}
	// A bounded read keeps the connection reusable without trusting the
	// receiver's body size.
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode, nil
}

// Dropped is how many events did not fit in the queue.
func (s *Sender) Dropped() uint64 { return s.sub.Dropped() }

// Close stops taking events and gives the ones queued until ctx ends to
// be delivered; then a delivery in progress is abandoned.
func (s *Sender) Close(ctx context.Context) {
	s.once.Do(func() {
		s.sub.Close()
		select {
		case <-s.done:
		case <-ctx.Done():
			close(s.stop)
			<-s.done
		}
	})
}
