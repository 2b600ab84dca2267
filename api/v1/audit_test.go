package v1

import (
	"errors"
	"net/url"
	"testing"
	"time"

	"github.com/execbox/execbox/sandbox"
)

func TestAuditQuery(t *testing.T) {
	since := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	q := AuditQuery{Token: "ci", Operation: OpRun, ErrorCode: "busy", Since: since, Until: since.Add(time.Hour), Limit: 7}
	got, err := ParseAuditQuery(q.Values())
	if err != nil || got != q {
		t.Fatalf("%+v %v", got, err)
	}
	for _, tc := range []struct{ query, field string }{
		{"limit=1001", "limit"}, {"limit=-1", "limit"}, {"limit=x", "limit"},
		{"since=yesterday", "since"}, {"kind=job", "kind"}, {"colour=red", "colour"},
	} {
		v, _ := url.ParseQuery(tc.query)
		_, err := ParseAuditQuery(v)
		var fe *FieldError
		if !errors.As(err, &fe) || fe.Field != tc.field || !errors.Is(err, sandbox.ErrInvalid) {
			t.Errorf("%s: %v", tc.query, err)
		}
	}
	for _, ok := range []string{"limit=0", "limit=1000", ""} {
		v, _ := url.ParseQuery(ok)
		if _, err := ParseAuditQuery(v); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}
