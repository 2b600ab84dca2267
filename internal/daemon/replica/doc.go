// Package replica lets several execbox serve replicas of one deployment
// share the session API without sharing state: a session lives in the
// replica that made it, its id begins with that replica's name, and a
// replica asked about a session of another passes the request to it.
//
// A Finder turns a replica's name into the base URL it is reached at:
// Static from a configured list, or Pods, which looks the name up as a
// Pod of the server's labels in its own namespace through the Kubernetes
// API — no consensus, gossip or shared store of ours.
package replica
