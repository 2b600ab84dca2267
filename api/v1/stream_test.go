package v1

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestChunkerKeepsCharactersWhole(t *testing.T) {
	c := &Chunker{Type: EventStdout}
	var evs []*StreamEvent
	for _, p := range []string{"a\xc3", "\xa9", "\xe2\x82", "\xac!", "\xf0\x9f\x98", "\x80"} {
		if ev := c.Next([]byte(p)); ev != nil {
			evs = append(evs, ev)
		}
	}
	var got []string
	for _, ev := range evs {
		if ev.DataBase64 != nil || ev.Type != EventStdout {
			t.Fatalf("event %+v", ev)
		}
		got = append(got, ev.Data)
	}
	if strings.Join(got, "|") != "a|é|€!|😀" {
		t.Fatalf("events %q", got)
	}
	if c.Flush() != nil {
		t.Fatal("nothing should be held back")
	}
	// Bytes that are not UTF-8 go as base64; a dangling lead byte is
	// flushed at the end.
	if ev := c.Next([]byte("x\xffy")); ev.DataBase64 == nil || string(ev.Bytes()) != "x\xffy" {
		t.Fatalf("invalid bytes: %+v", ev)
	}
	if ev := c.Next([]byte("z\xe2")); ev.Data != "z" {
		t.Fatalf("%+v", ev)
	}
	if ev := c.Flush(); ev == nil || string(ev.DataBase64) != "\xe2" {
		t.Fatalf("flush: %+v", ev)
	}
	// The event round-trips through JSON.
	b, _ := json.Marshal(&StreamEvent{Type: EventStderr, DataBase64: []byte{0xff}})
	var ev StreamEvent
	if err := json.Unmarshal(b, &ev); err != nil || string(ev.Bytes()) != "\xff" {
		t.Fatalf("%s: %+v %v", b, ev, err)
	}
}
