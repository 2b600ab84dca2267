//go:build race

package native

// raceEnabled: every re-executed init is the race-instrumented test binary,
// whose start costs tens of milliseconds; long loops run fewer times.
const raceEnabled = true
