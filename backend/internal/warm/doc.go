// Package warm keeps started machines (booted VMs, started Pods) per
// shape, so that a backend's Create takes one instead of waiting seconds
// for it. Each serves one sandbox, then goes: nothing of one sandbox is
// ever seen by the next. The microvm and kubernetes backends use it.
package warm
