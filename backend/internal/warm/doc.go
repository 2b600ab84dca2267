// Package warm keeps started machines (booted VMs, started Pods) per
// shape, so that a backend's Create takes one instead of waiting seconds
// for it. Each serves one sandbox, then goes: nothing of one sandbox is
// ever seen by the next. The microvm and kubernetes backends use it.
//
// A shape keeps what its demand needs within a floor and a ceiling
// (Sizing): the arrivals expected while one machine starts — its arrival
// rate, decayed over Window, times its smoothed start time — plus one
// standard deviation, since arrivals come at random. Reaching that target
// takes no further arrival (each start that ends starts the rest), and a
// trimmer ends, every second, the waiting machines demand no longer needs.
package warm
