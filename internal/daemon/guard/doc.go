// Package guard decides, before any sandbox starts, whether an execution
// may run: policy rules, per-token budgets and human confirmation. It is
// pure logic; transports call it and serve its approvals.
//
// A Call is matched against Config.Rules in order. A rule matches when each
// of its non-empty lists (tokens, operations, tools, languages, backends)
// holds the call's value exactly, or "*". The first matching rule decides:
// allow, deny, or confirm (hold the call as a pending Approval until an
// operator decides it with Decide). No match means Config.Default (allow
// when empty). An admitted call then passes every Budget that applies to
// its token, and Admit returns a Pass; the caller charges the run's CPU
// time to it when the run ends.
//
// Invariants:
//   - Zero is open: a nil *Guard, or one made from a zero Config, admits
//     every call. Anything stricter takes configuration, checked whole by
//     Config.Validate (New refuses an invalid one).
//   - A continued call (Call.Continued: what is typed into an open
//     terminal) is refused by a rule that denies it and by an exhausted
//     budget, but no confirm rule holds it and no budget counts it: its
//     call was decided and counted when it was made.
//   - A refused or held call spends no budget. Executions count when a call
//     is admitted; CPU counts when its Pass is charged, so runs in flight
//     can pass a CPU budget together: it refuses the calls after them.
//   - Budgets are checked before a call is held (no operator is asked about
//     a call that cannot run) and again after it is approved, together
//     with counting: either every budget that applies counts the call or
//     none does.
//   - A budget's window is fixed per token: it starts at the token's first
//     admitted execution and ends Window later; the next call after that
//     starts a fresh one. A refusal says when the window ends
//     (BusyError.RetryAfter).
//   - A pending approval always ends: decided, expired (Approvals.Timeout),
//     or removed as soon as its Admit's context is done. Once ended, its ID
//     is unknown to Decide (ErrNotFound), whatever the ending was.
//   - Memory is bounded: at most Approvals.MaxPending approvals wait (one
//     more is refused at once as busy); counters of ended windows are
//     dropped when touched, on a sweep every shortest budget window, and
//     before a new counter would pass 100 000. At that cap with no window
//     ended, a call that needs a new counter is refused as busy.
//   - The places to wait are shared as the server's run slots are: a call
//     of a token that is not an admin token (Call.Admin) waits only within
//     its token's share (Approvals.MaxPendingPerToken) and outside the
//     places kept for admin tokens (Approvals.AdminPending); else it is
//     refused at once as busy (CodeApprovalsFull), so no token can fill
//     the places an admin's own calls need.
//   - Approval IDs are 128 random bits in hex: holding one is what lets an
//     operator decide, so they cannot be guessed. The token whose call
//     waits may not approve it (CodeSelfApproval) unless
//     Approvals.SelfApprove: confirmation means a second pair of eyes.
//   - Every refusal is a *sandbox.Error with one of this package's codes
//     (CodeDenied, CodeApprovalDenied, CodeApprovalExpired,
//     CodeApprovalsFull, CodeBudgetExhausted, CodeApprovalNotFound,
//     CodeSelfApproval, CodeInvalid); busy ones are wrapped in a
//     *BusyError that says when to retry.
//
// Concurrency: a Guard is safe for concurrent use. Admit blocks only while
// its call is held for approval. The notify callback runs on Admit's
// goroutine without any lock held, so it may call Pending or Decide. A
// Pass may be charged from any goroutine; only its first Charge counts.
package guard
